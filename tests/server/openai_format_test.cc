#include "server/openai_format.h"

#include <gtest/gtest.h>

namespace tq::server {
namespace {

using nlohmann::json;

ChoiceOutput Output(std::string text, FinishReason r, int64_t prompt, int64_t completion) {
  ChoiceOutput o;
  o.text = std::move(text);
  o.finished = true;
  o.reason = r;
  o.stats.prompt_tokens = prompt;
  o.stats.completion_tokens = completion;
  o.stats.cached_tokens = 1;
  return o;
}

TEST(OpenAiFormat, SseFraming) {
  EXPECT_EQ(SseData(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
  // A JSON string never contains a raw newline, so one event is one line.
  EXPECT_EQ(SseData(json{{"t", "x\n\ny"}}), "data: {\"t\":\"x\\n\\ny\"}\n\n");
}

TEST(OpenAiFormat, InvalidUtf8IsReplacedNotThrown) {
  std::string bad = "ok\xff\xfe";
  EXPECT_NO_THROW(Dump(json{{"t", bad}}));
  EXPECT_NE(Dump(json{{"t", bad}}).find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(OpenAiFormat, Ids) {
  std::string a = NewResponseId("chatcmpl-"), b = NewResponseId("chatcmpl-");
  EXPECT_EQ(a.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(a.size(), 9u + 24u);
  EXPECT_NE(a, b);
}

TEST(OpenAiFormat, ChatCompletion) {
  ResponseMeta meta{"chatcmpl-1", 100, "m"};
  json j = ChatCompletionJson(meta, {Output("hello", FinishReason::kLength, 5, 2)}, false);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 100);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
}

// The runtime's reasons as OpenAI names them: an eos id and a stop string are both "stop", and a
// reply that made tool calls and then ended (either way) is "tool_calls".
TEST(OpenAiFormat, FinishReasons) {
  EXPECT_STREQ(OpenAiFinishReason(FinishReason::kEos), "stop");
  EXPECT_STREQ(OpenAiFinishReason(FinishReason::kStop), "stop");
  EXPECT_STREQ(OpenAiFinishReason(FinishReason::kLength), "length");
  EXPECT_STREQ(ChatFinishReason(FinishReason::kEos, true), "tool_calls");
  EXPECT_STREQ(ChatFinishReason(FinishReason::kStop, true), "tool_calls");
  EXPECT_STREQ(ChatFinishReason(FinishReason::kEos, false), "stop");
  EXPECT_STREQ(ChatFinishReason(FinishReason::kLength, true), "length");
}

TEST(OpenAiFormat, ChatChunks) {
  ResponseMeta meta{"chatcmpl-1", 100, "m"};
  json first = ChatChunkJson(meta, 0, true, "", nullptr, nullptr, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  json last = ChatChunkJson(meta, 0, false, "", nullptr, "stop", false);
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  json usage = UsageChunkJson(meta, true, {Output("", FinishReason::kStop, 3, 4)});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
}

TEST(OpenAiFormat, CompletionWithEchoAndLogprobs) {
  ResponseMeta meta{"cmpl-1", 100, "m"};
  ChoiceOutput o = Output("ab", FinishReason::kStop, 1, 2);
  o.logprobs = {{"a", -0.5f, {{"a", -0.5f}, {"x", -1.5f}}}, {"b", -0.25f, {{"b", -0.25f}}}};
  json j = CompletionJson(meta, {o}, {"pre"}, true);
  EXPECT_EQ(j["choices"][0]["text"], "preab");
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::parse(R"(["a","b"])"));
  EXPECT_EQ(lp["text_offset"], json::parse("[3,4]"));
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][0]["x"].get<double>(), -1.5);
  json c = ChatLogprobsJson(o.logprobs);
  EXPECT_EQ(c["content"][0]["bytes"], json::parse("[97]"));
  EXPECT_EQ(c["content"][0]["top_logprobs"].size(), 2u);
}

}  // namespace
}  // namespace tq::server
