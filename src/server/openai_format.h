// OpenAI response bodies and server-sent-event framing, as pure functions of the generated
// output (tested without a server).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/generation.h"

namespace tq::server {

struct ResponseMeta {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
};

// "chatcmpl-" / "cmpl-" + 24 random hex digits.
std::string NewResponseId(const char* prefix);

// JSON text for the wire: invalid UTF-8 (never expected, but a token piece may split a
// character) is replaced by U+FFFD instead of throwing.
std::string Dump(const nlohmann::json& j);

// "data: <json>\n\n"
std::string SseData(const nlohmann::json& j);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

const char* OpenAiFinishReason(FinishReason r);  // "stop" / "length" ("stop" otherwise)
// A chat choice's: "tool_calls" when it stopped after making calls.
const char* ChatFinishReason(FinishReason r, bool made_tool_calls);

// message.tool_calls entries: {"id", "type": "function", "function": {"name", "arguments"}};
// streamed: the same with "index" (the call's position in the choice, from `first_index`).
nlohmann::json ToolCallsJson(const std::vector<ToolCallOut>& calls);
nlohmann::json ToolCallDeltasJson(const std::vector<ToolCallOut>& calls, size_t first_index);

nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// Chat: logprobs.content entries; completions: the legacy tokens/token_logprobs/top_logprobs.
nlohmann::json ChatLogprobsJson(const std::vector<LogprobEntry>& entries);
nlohmann::json CompletionLogprobsJson(const std::vector<LogprobEntry>& entries, size_t text_offset);

// Non-streaming responses. `outputs[i]` holds choice i's whole text and logprobs.
nlohmann::json ChatCompletionJson(const ResponseMeta& meta,
                                  const std::vector<ChoiceOutput>& outputs, bool logprobs);
nlohmann::json CompletionJson(const ResponseMeta& meta, const std::vector<ChoiceOutput>& outputs,
                              const std::vector<std::string>& echo_prefix, bool logprobs);

// Streaming chunks. `role` only on a chat choice's first chunk; `finish` on its last;
// `tool_calls` (delta.tool_calls, from ToolCallDeltasJson) when not null.
nlohmann::json ChatChunkJson(const ResponseMeta& meta, size_t index, bool role,
                             const std::string& text, const std::vector<LogprobEntry>* logprobs,
                             const char* finish, bool include_usage,
                             const nlohmann::json& tool_calls = nullptr);
nlohmann::json CompletionChunkJson(const ResponseMeta& meta, size_t index, const std::string& text,
                                   const std::vector<LogprobEntry>* logprobs, size_t text_offset,
                                   const char* finish, bool include_usage);
// The final chunk of stream_options.include_usage: no choices, usage set.
nlohmann::json UsageChunkJson(const ResponseMeta& meta, bool chat,
                              const std::vector<ChoiceOutput>& outputs);

}  // namespace tq::server
