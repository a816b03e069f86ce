// Tool calls in model output: each chat-template family writes them its own way; these parsers
// turn the generated text (decoded with special tokens kept) into OpenAI tool_calls plus the
// remaining content. A call that does not parse stays in the content as text: malformed model
// output is never an error.
//
//   hermes    <tool_call>{"name": N, "arguments": {...}}</tool_call>   (Hermes, Qwen 2.5 / 3)
//   llama3    {"name": N, "parameters": {...}} (the whole reply; several joined by ';'), or
//             <|python_tag|> followed by such JSON                       (Llama 3.1 / 3.2 / 3.3)
//   mistral   [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] or [TOOL_CALLS]N[ARGS]{...}
//   harmony   <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}<|call|>
//             (gpt-oss; also "<|start|>assistant to=functions.N<|channel|>..."; the final channel
//             is the content, the analysis channel the reasoning)
//   deepseek
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```
//             <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>  (V3; V3.1's N<｜tool▁sep｜>{...} too)
//   json      the reply is one JSON object {"name": N, "arguments": {...}} (models without a
//             tool syntax of their own; what constrained tool_choice produces for them)
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tq::server {

enum class ToolFamily { kNone, kJson, kHermes, kLlama3, kMistral, kHarmony, kDeepSeek };

const char* ToolFamilyName(ToolFamily f);  // "none", "json", "hermes", ...
// A --tool-parser value ("hermes", "qwen" = hermes, "llama3", "mistral", "harmony" / "gpt-oss",
// "deepseek", "json", "none"); nullopt when unknown.
std::optional<ToolFamily> ParseToolFamily(std::string_view name);
// The family a chat template's source writes (by the markers it contains); kJson when it writes
// none of them.
ToolFamily DetectToolFamily(std::string_view template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text (an object, compact)
};

struct ParsedReply {
  std::string content;    // text outside the calls, trimmed; markers removed
  std::string reasoning;  // harmony's analysis channel ("" otherwise)
  std::vector<ToolCall> calls;
};

ParsedReply ParseToolCalls(ToolFamily family, std::string_view text);

// Streaming: text arrives in pieces; content before a family's start marker streams out at once
// (holding back only what could be the start of a marker), and calls are released as each one
// completes (the rest at Finish).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFamily family) : family_(family) {}
  struct Delta {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Delta Push(std::string_view text);
  Delta Finish();
  // Calls released so far (their indices in the response run from 0).
  size_t calls_released() const { return released_; }

 private:
  Delta Scan(bool final);

  ToolFamily family_;
  std::string pending_;    // not yet released text
  bool in_calls_ = false;  // a start marker was seen: everything from pending_ on is calls
  bool at_start_ = true;   // nothing but whitespace released yet (json / llama3 start with '{')
  size_t released_ = 0;    // calls already released from pending_
};

// Ids as OpenAI clients expect them ("call_" + 24 alphanumerics); Mistral's templates insist on
// exactly 9 alphanumerics.
std::string NewToolCallId(ToolFamily family);

// Assistant messages with tool_calls as the family's template expects them: OpenAI clients send
// `arguments` as a JSON string; most templates print it with tojson and need the object (DeepSeek's
// concatenates it and needs the string). Returns the messages with that fixed.
nlohmann::ordered_json PrepareToolMessages(ToolFamily family, nlohmann::ordered_json messages);

}  // namespace tq::server
