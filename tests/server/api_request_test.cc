#include "server/api_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace tq::server {
namespace {

using nlohmann::json;

// The param an invalid body is rejected with (fails the test if it is accepted).
std::string RejectedParam(const std::string& body, bool chat) {
  try {
    json j = ParseJsonBody(body);
    if (chat) {
      ParseChatRequest(j);
    } else {
      ParseCompletionRequest(j);
    }
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.type(), "invalid_request_error");
    EXPECT_FALSE(std::string(e.what()).empty());
    return e.param();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

TEST(ApiRequest, ChatFields) {
  auto r = ParseChatRequest(json::parse(R"({
    "model": "m", "messages": [
      {"role": "system", "content": "be nice"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]},
      {"role": "developer", "content": "dev"}],
    "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "seed": 11, "stop": "END", "presence_penalty": 0.5, "frequency_penalty": -0.5,
    "stream": true, "stream_options": {"include_usage": true}, "logprobs": true,
    "top_logprobs": 3, "tools": [{"type": "function", "function": {"name": "f"}}], "unknown_field": {"x": 1}})"));
  EXPECT_EQ(r.endpoint, Endpoint::kChat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["id"], "1");
  EXPECT_EQ(r.messages[3]["role"], "system");
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_DOUBLE_EQ(*r.sampling.temperature, 0.5);
  EXPECT_EQ(*r.sampling.top_k, 40);
  EXPECT_EQ(*r.sampling.seed, 11u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.tools.size(), 1u);
}

TEST(ApiRequest, NullMeansAbsent) {
  auto r = ParseCompletionRequest(json::parse(
      R"({"prompt": "x", "temperature": null, "stop": null, "max_tokens": null, "seed": null})"));
  EXPECT_FALSE(r.sampling.temperature);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_TRUE(r.stop.empty());
}

TEST(ApiRequest, CompletionPromptForms) {
  auto one =
      ParseCompletionRequest(json::parse(R"({"prompt": "hi", "echo": true, "logprobs": 2})"));
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(one.prompts[0].text, "hi");
  EXPECT_TRUE(one.echo);
  EXPECT_TRUE(one.logprobs);
  EXPECT_EQ(one.top_logprobs, 2);
  auto ids = ParseCompletionRequest(json::parse(R"({"prompt": [1, 2, 3]})"));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_tokens);
  EXPECT_EQ(ids.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  auto many = ParseCompletionRequest(json::parse(R"({"prompt": ["a", [5, 6], "c"]})"));
  ASSERT_EQ(many.prompts.size(), 3u);
  EXPECT_TRUE(many.prompts[1].is_tokens);
  EXPECT_EQ(many.prompts[2].text, "c");
}

TEST(ApiRequest, RejectsNamingTheField) {
  EXPECT_EQ(RejectedParam("{", true), "");
  EXPECT_EQ(RejectedParam("", true), "");
  EXPECT_EQ(RejectedParam("\"str\"", true), "");
  EXPECT_EQ(RejectedParam(R"({"prompt": 88888888888888888888E8888888888888})", false), "");
  EXPECT_EQ(RejectedParam(R"({})", true), "messages");
  EXPECT_EQ(RejectedParam(R"({"messages": []})", true), "messages");
  EXPECT_EQ(RejectedParam(R"({"messages": {}})", true), "messages");
  EXPECT_EQ(RejectedParam(R"({"messages": [1]})", true), "messages[0]");
  EXPECT_EQ(RejectedParam(R"({"messages": [{"content": "x"}]})", true), "messages[0].role");
  EXPECT_EQ(RejectedParam(R"({"messages": [{"role": "bot", "content": "x"}]})", true),
            "messages[0].role");
  EXPECT_EQ(RejectedParam(R"({"messages": [{"role": "user"}]})", true), "messages[0].content");
  EXPECT_EQ(RejectedParam(R"({"messages": [{"role": "user", "content": 5}]})", true),
            "messages[0].content");
  EXPECT_EQ(RejectedParam(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                          true),
            "messages[0].content[0].type");
  EXPECT_EQ(
      RejectedParam(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", true),
      "messages[0].content[0].text");
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(RejectedParam("{" + m + R"(, "temperature": "hot"})", true), "temperature");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "temperature": 3})", true), "temperature");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "top_p": 0})", true), "top_p");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "top_k": 1.5})", true), "top_k");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "max_tokens": 0})", true), "max_tokens");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "max_tokens": 1e300})", true), "max_tokens");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "max_completion_tokens": -5})", true),
            "max_completion_tokens");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stop": [1]})", true), "stop[0]");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stop": {}})", true), "stop");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stop": ")" + std::string(600, 'x') + "\"}", true),
            "stop");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stop": ["a", ")" + std::string(600, 'x') + "\"]}", true),
            "stop[1]");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "seed": "x"})", true), "seed");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stream": "yes"})", true), "stream");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stream_options": []})", true), "stream_options");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "stream_options": {"include_usage": 1}})", true),
            "stream_options.include_usage");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "top_logprobs": 3})", true), "top_logprobs");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "logprobs": true, "top_logprobs": 50})", true),
            "top_logprobs");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "n": 1000})", true), "n");  // n up to kMaxChoices
  EXPECT_EQ(RejectedParam("{" + m + R"(, "tools": [{"type": "function"}]})", true),
            "tools[0].function");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "presence_penalty": 2.5})", true), "presence_penalty");
  EXPECT_EQ(RejectedParam("{" + m + R"(, "model": 5})", true), "model");
  EXPECT_EQ(RejectedParam(R"({"prompt": 5})", false), "prompt");
  EXPECT_EQ(RejectedParam(R"({"prompt": []})", false), "prompt");
  EXPECT_EQ(RejectedParam(R"({"prompt": [1, "a"]})", false), "prompt[1]");
  EXPECT_EQ(RejectedParam(R"({"prompt": [-1]})", false), "prompt[0]");
  EXPECT_EQ(RejectedParam(R"({"prompt": [4294967296]})", false), "prompt[0]");
  EXPECT_EQ(RejectedParam(R"({"prompt": ["a", 5]})", false), "prompt[1]");
  EXPECT_EQ(RejectedParam(R"({"prompt": ["a", []]})", false), "prompt[1]");
  EXPECT_EQ(RejectedParam(R"({"prompt": "a", "logprobs": true})", false), "logprobs");
  EXPECT_EQ(RejectedParam(R"({"prompt": "a", "suffix": "z"})", false), "suffix");
}

TEST(ApiRequest, ResolveSamplingOverridesDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.8f;
  defaults.top_p = 0.95f;
  SamplingRequest req;
  req.top_p = 0.5;
  req.seed = 9;
  SamplingParams p = ResolveSampling(req, defaults, 1234);
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_FLOAT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.seed, 9u);
  req.seed.reset();
  EXPECT_EQ(ResolveSampling(req, defaults, 1234).seed, 1234u);
}

TEST(ApiRequest, TokenizeAndDetokenize) {
  auto t = ParseTokenizeRequest(json::parse(R"({"content": "x", "add_special": false})"));
  EXPECT_EQ(t.text, "x");
  EXPECT_FALSE(t.add_special);
  auto p = ParseTokenizeRequest(json::parse(R"({"prompt": "y"})"));
  EXPECT_EQ(p.text, "y");
  EXPECT_TRUE(p.add_special);
  auto m = ParseTokenizeRequest(json::parse(R"({"messages": [{"role": "user", "content": "z"}]})"));
  EXPECT_TRUE(m.has_messages);
  EXPECT_THROW(ParseTokenizeRequest(json::parse("{}")), ApiError);
  EXPECT_THROW(ParseTokenizeRequest(json::parse(R"({"content": 1})")), ApiError);
  EXPECT_EQ(ParseDetokenizeRequest(json::parse(R"({"tokens": [1, 2]})")),
            (std::vector<int32_t>{1, 2}));
  EXPECT_THROW(ParseDetokenizeRequest(json::parse(R"({"tokens": [1.5]})")), ApiError);
  EXPECT_THROW(ParseDetokenizeRequest(json::parse(R"({})")), ApiError);
}

TEST(ApiError, OpenAiShape) {
  ApiError e(404, "invalid_request_error", "no such model", "model", "model_not_found");
  json j = e.ToJson();
  EXPECT_EQ(j["error"]["message"], "no such model");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  json k = ErrorJson("x", "server_error");
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
}

}  // namespace
}  // namespace tq::server
