// The OpenAI request bodies this server accepts, parsed and validated into plain structs.
// Every error is an ApiError (HTTP 400) naming the field at fault, e.g. "messages[2].content".
// Unknown fields are ignored (clients send many); a field set to null counts as absent.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace tq::server {

// Sampling controls as the request gave them (OpenAI's ranges, plus vLLM's top_k / min_p /
// repetition_penalty); absent fields fall back to the model's generation_config defaults.
struct SamplingRequest {
  std::optional<double> temperature;         // [0, 2]; 0 = greedy
  std::optional<double> top_p;               // (0, 1]
  std::optional<int64_t> top_k;              // >= 0; 0 (or vLLM's -1) = off
  std::optional<double> min_p;               // [0, 1]
  std::optional<double> presence_penalty;    // [-2, 2]
  std::optional<double> frequency_penalty;   // [-2, 2]
  std::optional<double> repetition_penalty;  // > 0; 1 = off
  std::optional<uint64_t> seed;
};

// The runtime's parameters: `defaults` overridden by what the request set; `random_seed` when
// the request gave no seed.
tq::SamplingParams ResolveSampling(const SamplingRequest& req, const tq::SamplingParams& defaults,
                                   uint64_t random_seed);

// One prompt of /v1/completions: text, or token ids given by the client.
struct Prompt {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

enum class Endpoint { kChat, kCompletion };

// tool_choice: "auto" (the model decides; calls are parsed out of its text), "none" (no
// parsing), "required" (one call to some tool, by constrained decoding) or a named function.
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };
// response_format.type.
enum class ResponseFormat { kText, kJsonObject, kJsonSchema };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;  // as sent ("" when absent)
  // Chat: messages normalized to [{"role", "content": string, ...}] (content-part arrays joined),
  // ready for the chat template. tools / template_kwargs: null when absent (tools=[] stays []).
  // ordered_json keeps keys as the client sent them: a template's tojson prints them so.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;
  nlohmann::ordered_json template_kwargs;
  ToolChoice tool_choice = ToolChoice::kAuto;
  size_t tool_choice_index = 0;  // kFunction: which entry of `tools`
  bool parallel_tool_calls = true;
  ResponseFormat response_format = ResponseFormat::kText;
  nlohmann::ordered_json json_schema;  // kJsonSchema: response_format.json_schema.schema
  bool add_generation_prompt = true;
  // Completions: one or more prompts (each becomes `n` choices, prompt-major).
  std::vector<Prompt> prompts;
  int n = 1;  // choices per prompt
  bool echo = false;

  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens
  SamplingRequest sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;  // chat: top_logprobs; completions: the integer `logprobs`
};

// Request limits that validation enforces.
constexpr int kMaxStopStrings = 16;
// Bytes per stop string: the stop matcher runs on the scheduler thread that serves everyone.
constexpr size_t kMaxStopBytes = 512;
constexpr int kMaxTopLogprobs = 20;
constexpr int kMaxPrompts = 64;
// Choices per request (prompts x n).
constexpr int kMaxChoices = 64;

// Parses a request body; malformed JSON or a non-object -> 400.
nlohmann::ordered_json ParseJsonBody(const std::string& body);

GenerationRequest ParseChatRequest(const nlohmann::ordered_json& body);
GenerationRequest ParseCompletionRequest(const nlohmann::ordered_json& body);

// POST /tokenize: {"content"|"prompt": string} or {"messages": [...]}, "add_special" /
// "add_special_tokens" (default true for text, false for messages: the template adds them).
struct TokenizeRequest {
  std::string text;
  bool has_messages = false;
  nlohmann::ordered_json messages;  // normalized like chat messages
  bool add_special = true;
  bool with_pieces = false;
};
TokenizeRequest ParseTokenizeRequest(const nlohmann::ordered_json& body);

// POST /detokenize: {"tokens": [int...]}.
std::vector<int32_t> ParseDetokenizeRequest(const nlohmann::ordered_json& body);

}  // namespace tq::server
