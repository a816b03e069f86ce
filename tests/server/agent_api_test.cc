// The agent-facing chat API over HTTP with the fake model: tool_choice named / required through
// constrained decoding (non-streaming and streamed delta.tool_calls), response_format json_object
// and json_schema, unsupported schema keywords and request fields as 400s naming them, n > 1 with
// seeds, max_tokens beyond the context.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace tq::server {
namespace {

using json = nlohmann::json;

class AgentApiTest : public test::ServerFixture {};

constexpr const char* kTools = R"("tools": [
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer"}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"utc": {"type": "boolean"}}, "required": ["utc"]}}}])";

std::string Chat(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 900, )" + extra + "}";
}

TEST_F(AgentApiTest, NamedToolChoiceGivesAValidCall) {
  Start();
  const json r =
      PostOk(Chat(std::string(kTools) +
                  R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})"));
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.dump();
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_time");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["utc"].is_boolean()) << args.dump();
  EXPECT_TRUE(choice["message"]["content"].is_null());
}

TEST_F(AgentApiTest, RequiredToolChoiceStreamsToolCallDeltas) {
  Start();
  auto res = Post(Chat(std::string(kTools) + R"(, "tool_choice": "required", "stream": true)"));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  std::map<int, json> calls;  // index -> reassembled call
  std::string finish;
  for (const json& ev : Events(res->body)) {
    if (ev == "[DONE]") continue;
    const json& c = ev["choices"][0];
    if (c["delta"].contains("tool_calls")) {
      for (const json& d : c["delta"]["tool_calls"]) {
        json& acc = calls[d["index"].get<int>()];
        if (d.contains("id")) acc["id"] = d["id"];
        if (d["function"].contains("name")) acc["name"] = d["function"]["name"];
        acc["arguments"] = acc.value("arguments", "") + d["function"].value("arguments", "");
      }
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u);
  const std::string name = calls[0]["name"];
  EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
  EXPECT_TRUE(json::parse(calls[0]["arguments"].get<std::string>()).is_object());
}

TEST_F(AgentApiTest, JsonSchemaResponseFormatParsesAndValidates) {
  Start();
  const json r = PostOk(Chat(R"("response_format": {"type": "json_schema", "json_schema": {
      "name": "answer", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"},
      "color": {"enum": ["red", "green"]}, "n": {"type": "array", "items": {"type": "null"},
      "maxItems": 2}}, "required": ["ok", "color"], "additionalProperties": false}}})"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
  const json out = json::parse(r["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_TRUE(out["ok"].is_boolean());
  EXPECT_TRUE(out["color"] == "red" || out["color"] == "green");
  for (const auto& [k, v] : out.items()) EXPECT_TRUE(k == "ok" || k == "color" || k == "n") << k;
}

TEST_F(AgentApiTest, JsonObjectResponseFormat) {
  Start();
  // The fake model's greedy walk never closes a string by itself; a small max_tokens ends it
  // with "length" and the text so far is a valid prefix of an object.
  const json r = PostOk(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6,
                            "response_format": {"type": "json_object"}})");
  const std::string text = r["choices"][0]["message"]["content"];
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], '{');
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
}

TEST_F(AgentApiTest, UnsupportedSchemaAndFieldsAre400sNamingThem) {
  Start();
  Expect400(Chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}}}})"),
            "response_format.json_schema.schema", "'minimum'");
  Expect400(Chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})"),
            "response_format.json_schema.schema", "schema");
  Expect400(Chat(R"("response_format": {"type": "xml"})"), "response_format.type", "json_schema");
  Expect400(Chat(R"("tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}}}],
      "tool_choice": "required")"),
            "tools", "'pattern'");
  Expect400(Chat(R"("tool_choice": "required")"), "tool_choice", "tools");
  Expect400(Chat(std::string(kTools) +
                 R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"),
            "tool_choice.function.name", "nope");
  Expect400(Chat(R"("tool_choice": "sometimes")"), "tool_choice", "sometimes");
  Expect400(Chat(R"("tools": [{"type": "function", "function": {}}])"), "tools[0].function.name",
            "name");
  Expect400(Chat(R"("logit_bias": {"5": 10})"), "logit_bias", "not supported");
  Expect400(Chat(R"("functions": [])"), "functions", "tools");
  Expect400(Chat(R"("audio": {"voice": "x"})"), "audio", "not supported");
  Expect400(Chat(R"("modalities": ["text", "audio"])"), "modalities", "not supported");
  Expect400(Chat(R"("n": 1000)"), "n", "between");
  auto r = client_->Post("/v1/completions",
                         R"({"prompt": "a", "response_format": {"type": "json_object"}})",
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // Fields that cannot change the output are accepted.
  PostOk(Chat(R"("user": "u1", "store": false, "metadata": {"a": "b"}, "logit_bias": {})"));
}

TEST_F(AgentApiTest, MaxTokensBeyondTheContextIs400) {
  Start();
  Expect400(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1020})",
            "max_tokens", "maximum context length is 1024");
}

TEST_F(AgentApiTest, SeveralChoicesPerRequest) {
  Start();
  const json r = PostOk(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                            "n": 3, "seed": 5})");
  ASSERT_EQ(r["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["message"]["content"], ";<=>");
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
  auto c = client_->Post("/v1/completions", R"({"prompt": ["a", "b"], "n": 2, "max_tokens": 3})",
                         "application/json");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 200) << c->body;
  const json cj = json::parse(c->body);
  ASSERT_EQ(cj["choices"].size(), 4u);
  // Prompt-major order; the fake model counts up from the prompt's last byte.
  EXPECT_EQ(cj["choices"][0]["text"], "bcd");
  EXPECT_EQ(cj["choices"][1]["text"], "bcd");
  EXPECT_EQ(cj["choices"][2]["text"], "cde");
  EXPECT_EQ(cj["choices"][3]["text"], "cde");
}

TEST_F(AgentApiTest, ToolChoiceNoneAndAutoLeavePlainTextAlone) {
  Start();
  for (const char* choice : {"\"none\"", "\"auto\""}) {
    const json r = PostOk(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, )" +
                          std::string(kTools) + ", \"tool_choice\": " + choice + "}");
    EXPECT_EQ(r["choices"][0]["message"]["content"], ";<=>");
    EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  }
}

TEST_F(AgentApiTest, ToolParserOverrideChangesTheSyntax) {
  ServerOptions o;
  o.tool_parser = "hermes";
  Start(o);
  const json r =
      PostOk(Chat(std::string(kTools) +
                  R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  const json& call = r["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>())["city"], "Paris");
}

}  // namespace
}  // namespace tq::server
