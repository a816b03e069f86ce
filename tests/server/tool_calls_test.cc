// Tool-call parsers of every family on recorded-style model outputs (well-formed, several calls,
// malformed: those fall back to text), streaming in random pieces equal to the one-shot parse,
// family detection from the shared templates, and round trips of assistant tool_calls.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "tokenizer/chat_template.h"
#include "tokenizer/templates/fixture_dir.h"

namespace tq::server {
namespace {

using json = nlohmann::ordered_json;

struct Case {
  ToolFamily family;
  const char* text;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  const char* content;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> k = {
      // Hermes / Qwen.
      {ToolFamily::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>",
       {{"get_weather", R"({"city":"Paris"})"}},
       ""},
      {ToolFamily::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>",
       {{"a", "{}"}, {"b", R"({"x":1})"}},
       "Let me check."},
      {ToolFamily::kHermes,
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}\n</tool_call>",
       {},
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}\n</tool_call>"},  // bad JSON
      {ToolFamily::kHermes,
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}",
       {{"a", R"({"x":1})"}},
       ""},  // cut before the close tag (max_tokens or EOS): still a call
      {ToolFamily::kHermes, "No tools needed: 2 + 2 = 4.", {}, "No tools needed: 2 + 2 = 4."},
      {ToolFamily::kHermes,
       "<tool_call>{\"arguments\": {}}</tool_call>",
       {},
       "<tool_call>{\"arguments\": {}}</tool_call>"},  // no name
      // Llama 3.x.
      {ToolFamily::kLlama3,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
       {{"get_weather", R"({"city":"Oslo"})"}},
       ""},
      {ToolFamily::kLlama3,
       "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"x\"}}; {\"name\": \"b\", "
       "\"parameters\": {}}",
       {{"a", R"({"q":"x"})"}, {"b", "{}"}},
       ""},
      {ToolFamily::kLlama3, "{\"not\": \"a call\"}", {}, "{\"not\": \"a call\"}"},
      {ToolFamily::kLlama3,
       "{\"name\": \"a\", \"parameters\": {",
       {},
       "{\"name\": \"a\", \"parameters\": {"},
      {ToolFamily::kLlama3, "Paris is the capital.", {}, "Paris is the capital."},
      // Mistral.
      {ToolFamily::kMistral,
       "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"n\": 2}}, {\"name\": \"b\", "
       "\"arguments\": {}}]",
       {{"a", R"({"n":2})"}, {"b", "{}"}},
       ""},
      {ToolFamily::kMistral,
       "[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}",
       {{"get_time", R"({"tz":"UTC"})"}},
       ""},
      {ToolFamily::kMistral,
       "[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{}[TOOL_CALLS]b[ARGS]{\"k\":[1]}",
       {{"a", "{}"}, {"b", R"({"k":[1]})"}},
       ""},
      {ToolFamily::kMistral,
       "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": ",
       {},
       "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\":"},
      // GPT-OSS harmony.
      {ToolFamily::kHarmony,
       "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"}<|call|>",
       {{"get_weather", R"({"city":"Rome"})"}},
       ""},
      {ToolFamily::kHarmony,
       "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"id\": 7}",
       {{"lookup", R"({"id":7})"}},
       ""},
      {ToolFamily::kHarmony,
       "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>"
       "Hello!<|return|>",
       {},
       "Hello!"},
      {ToolFamily::kHarmony,
       "<|channel|>commentary to=functions.x <|constrain|>json<|message|>{broken<|call|>",
       {},
       "<|channel|>commentary to=functions.x <|constrain|>json<|message|>{broken<|call|>"},
      // DeepSeek V3 and V3.1.
      {ToolFamily::kDeepSeek,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
       "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}},
       ""},
      {ToolFamily::kDeepSeek,
       "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"tq\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {{"search", R"({"q":"tq"})"}},
       "Checking."},
      {ToolFamily::kDeepSeek,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function get_weather "
       "{\"city\"<｜tool▁call▁end｜>",
       {},
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function get_weather "
       "{\"city\"<｜tool▁call▁end｜>"},
      // Bare JSON.
      {ToolFamily::kJson,
       "{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}",
       {{"f", R"({"a":[1,2]})"}},
       ""},
      {ToolFamily::kJson, "plain words", {}, "plain words"},
      {ToolFamily::kJson, "{\"name\": 3}", {}, "{\"name\": 3}"},
  };
  return k;
}

TEST(ToolCalls, RecordedOutputsOfEveryFamily) {
  for (const Case& c : Cases()) {
    const ParsedReply r = ParseToolCalls(c.family, c.text);
    SCOPED_TRACE(std::string(ToolFamilyName(c.family)) + ": " + c.text);
    ASSERT_EQ(r.calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(r.calls[i].name, c.calls[i].first);
      EXPECT_EQ(r.calls[i].arguments, c.calls[i].second);
      EXPECT_TRUE(json::parse(r.calls[i].arguments).is_object());
    }
    EXPECT_EQ(r.content, c.content);
  }
}

TEST(ToolCalls, HarmonyReasoningChannel) {
  const ParsedReply r = ParseToolCalls(
      ToolFamily::kHarmony,
      "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final"
      "<|message|>Done.<|return|>");
  EXPECT_EQ(r.reasoning, "Think first.");
  EXPECT_EQ(r.content, "Done.");
}

TEST(ToolCalls, StreamingInRandomPiecesMatchesOneShot) {
  std::mt19937 rng(3);
  for (const Case& c : Cases()) {
    for (int trial = 0; trial < 20; ++trial) {
      ToolCallStream s(c.family);
      std::string content;
      std::vector<ToolCall> calls;
      const std::string text = c.text;
      for (size_t pos = 0; pos < text.size();) {
        const size_t n = std::min(text.size() - pos, size_t(1 + rng() % 7));
        auto d = s.Push(std::string_view(text).substr(pos, n));
        content += d.content;
        for (auto& call : d.calls) calls.push_back(call);
        pos += n;
      }
      auto d = s.Finish();
      content += d.content;
      for (auto& call : d.calls) calls.push_back(call);
      SCOPED_TRACE(text);
      ASSERT_EQ(calls.size(), c.calls.size());
      for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].arguments, c.calls[i].second);
      // Content streamed before a marker keeps its whitespace; the one-shot parse trims it.
      std::string trimmed = content;
      trimmed.erase(0, trimmed.find_first_not_of(" \n"));
      trimmed.erase(trimmed.find_last_not_of(" \n") + 1);
      EXPECT_EQ(trimmed, c.content);
    }
  }
}

TEST(ToolCalls, HermesCallsAreReleasedAsTheyClose) {
  ToolCallStream s(ToolFamily::kHermes);
  EXPECT_EQ(s.Push("Hi <tool").content, "Hi ");  // "<tool" held back
  auto d = s.Push("_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "a");
  d = s.Push("<tool_call>{\"name\": \"b\"}");  // no close tag yet
  EXPECT_TRUE(d.calls.empty());
  d = s.Finish();
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "b");
}

TEST(ToolCalls, FamilyNamesAndIds) {
  for (const char* n : {"none", "json", "hermes", "llama3", "mistral", "harmony", "deepseek"}) {
    auto f = ParseToolFamily(n);
    ASSERT_TRUE(f) << n;
    EXPECT_STREQ(ToolFamilyName(*f), n);
  }
  EXPECT_EQ(ParseToolFamily("qwen"), ToolFamily::kHermes);
  EXPECT_FALSE(ParseToolFamily("hermes2"));
  EXPECT_EQ(NewToolCallId(ToolFamily::kMistral).size(), 9u);
  EXPECT_EQ(NewToolCallId(ToolFamily::kHermes).rfind("call_", 0), 0u);
  EXPECT_NE(NewToolCallId(ToolFamily::kHermes), NewToolCallId(ToolFamily::kHermes));
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(tq::test::TemplateFixtureDir() + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ToolCalls, FamiliesDetectedFromTheSharedTemplates) {
  const std::pair<const char*, ToolFamily> k[] = {
      {"hermes.jinja", ToolFamily::kHermes},     {"qwen25.jinja", ToolFamily::kHermes},
      {"qwen3.jinja", ToolFamily::kHermes},      {"llama31.jinja", ToolFamily::kLlama3},
      {"mistral.jinja", ToolFamily::kMistral},   {"harmony.jinja", ToolFamily::kHarmony},
      {"deepseek.jinja", ToolFamily::kDeepSeek}, {"gemma.jinja", ToolFamily::kJson}};
  for (const auto& [file, family] : k) {
    const std::string src = ReadFixture(file);
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(DetectToolFamily(src), family) << file;
  }
}

// An OpenAI-style conversation (arguments as a JSON string, as clients send them) rendered by each
// family's template, and the assistant turn of the rendering parsed back into the same call.
TEST(ToolCalls, AssistantToolCallsRoundTripThroughTheTemplates) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather.", "parameters": {"type": "object", "properties": {"city":
      {"type": "string"}}, "required": ["city"]}}}])");
  const std::pair<const char*, ToolFamily> k[] = {
      {"hermes.jinja", ToolFamily::kHermes},    {"qwen25.jinja", ToolFamily::kHermes},
      {"qwen3.jinja", ToolFamily::kHermes},     {"llama31.jinja", ToolFamily::kLlama3},
      {"mistral.jinja", ToolFamily::kMistral},  {"harmony.jinja", ToolFamily::kHarmony},
      {"deepseek.jinja", ToolFamily::kDeepSeek}};
  for (const auto& [file, family] : k) {
    SCOPED_TRACE(file);
    const std::string id = NewToolCallId(family);
    json msgs = json::array();
    msgs.push_back({{"role", "user"}, {"content", "Weather in Paris?"}});
    json call = {{"id", id},
                 {"type", "function"},
                 {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}};
    msgs.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
    msgs.push_back({{"role", "tool"},
                    {"tool_call_id", id},
                    {"name", "get_weather"},
                    {"content", "{\"temp\": 21}"}});
    const ChatTemplate t = ChatTemplate::Parse(ReadFixture(file), file);
    json extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
    std::string out;
    ASSERT_NO_THROW(out = t.Render(PrepareToolMessages(family, msgs), tools, true, extra));
    // Arguments are printed once, as an object (no doubly encoded string).
    EXPECT_EQ(out.find("\\\"city\\\""), std::string::npos) << out;
    EXPECT_NE(out.find("Paris"), std::string::npos);
    EXPECT_NE(out.find("21"), std::string::npos);  // the tool result reached the prompt
    // The rendered call parses back: the assistant turn is what follows the family's assistant
    // header (the last one before the tool result) up to its end-of-turn marker.
    const size_t result = out.find("temp");
    ASSERT_NE(result, std::string::npos);
    size_t from = std::string::npos;
    for (const char* h :
         {"<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n", "[/INST]",
          "<|start|>assistant", "<｜Assistant｜>"}) {
      const size_t at = out.rfind(h, result);
      if (at != std::string::npos && (from == std::string::npos || at + strlen(h) > from)) {
        from = at + strlen(h);
      }
    }
    ASSERT_NE(from, std::string::npos) << out;
    size_t to = result;
    for (const char* e : {"<|im_end|>", "<|eot_id|>", "</s>", "<｜end▁of▁sentence｜>"}) {
      to = std::min(to, out.find(e, from));
    }
    const ParsedReply r = ParseToolCalls(family, out.substr(from, to - from));
    ASSERT_FALSE(r.calls.empty()) << out.substr(from, to - from) << "\n---\n" << out;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  }
}

}  // namespace
}  // namespace tq::server
