#include "server/openai_format.h"

#include <fmt/format.h>

#include <mutex>
#include <random>

namespace tq::server {

using nlohmann::json;

std::string NewResponseId(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t a, b;
  {
    std::lock_guard lk(mu);
    a = rng();
    b = rng();
  }
  return fmt::format("{}{:016x}{:08x}", prefix, a, uint32_t(b));
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SseData(const json& j) { return "data: " + Dump(j) + "\n\n"; }

const char* OpenAiFinishReason(FinishReason r) {
  return r == FinishReason::kLength ? "length" : "stop";
}

const char* ChatFinishReason(FinishReason r, bool made_tool_calls) {
  if ((r == FinishReason::kStop || r == FinishReason::kEos) && made_tool_calls) return "tool_calls";
  return OpenAiFinishReason(r);
}

json ToolCallsJson(const std::vector<ToolCallOut>& calls) {
  json out = json::array();
  for (const auto& c : calls) {
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.call.name}, {"arguments", c.call.arguments}}}});
  }
  return out;
}

json ToolCallDeltasJson(const std::vector<ToolCallOut>& calls, size_t first_index) {
  json out = ToolCallsJson(calls);
  for (size_t i = 0; i < out.size(); ++i) out[i]["index"] = first_index + i;
  return out;
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

namespace {

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json Usage(const std::vector<ChoiceOutput>& outputs) {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (const auto& o : outputs) {
    prompt += o.stats.prompt_tokens;
    completion += o.stats.completion_tokens;
    cached += o.stats.cached_tokens;
  }
  return UsageJson(prompt, completion, cached);
}

json Base(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", "turboquant"}};
}

}  // namespace

json ChatLogprobsJson(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const auto& e : entries) {
    json top = json::array();
    for (const auto& [t, p] : e.top) {
      top.push_back({{"token", t}, {"logprob", p}, {"bytes", Bytes(t)}});
    }
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", Bytes(e.token)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json CompletionLogprobsJson(const std::vector<LogprobEntry>& entries, size_t text_offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (const auto& e : entries) {
    tokens.push_back(e.token);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [t, p] : e.top) top[t] = p;
    tops.push_back(top);
    offs.push_back(text_offset);
    text_offset += e.token.size();
  }
  return {
      {"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json ChatCompletionJson(const ResponseMeta& meta, const std::vector<ChoiceOutput>& outputs,
                        bool logprobs) {
  json j = Base(meta, "chat.completion");
  json choices = json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ChoiceOutput& o = outputs[i];
    json message = {{"role", "assistant"}, {"content", o.text}};
    if (!o.tool_calls.empty()) {
      if (o.text.empty()) message["content"] = nullptr;  // as OpenAI: calls only
      message["tool_calls"] = ToolCallsJson(o.tool_calls);
    }
    choices.push_back({{"index", i},
                       {"message", std::move(message)},
                       {"logprobs", logprobs ? ChatLogprobsJson(o.logprobs) : json(nullptr)},
                       {"finish_reason", ChatFinishReason(o.reason, !o.tool_calls.empty())}});
  }
  j["choices"] = std::move(choices);
  j["usage"] = Usage(outputs);
  return j;
}

json CompletionJson(const ResponseMeta& meta, const std::vector<ChoiceOutput>& outputs,
                    const std::vector<std::string>& echo_prefix, bool logprobs) {
  json j = Base(meta, "text_completion");
  json choices = json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ChoiceOutput& o = outputs[i];
    const std::string& prefix = i < echo_prefix.size() ? echo_prefix[i] : std::string();
    choices.push_back(
        {{"index", i},
         {"text", prefix + o.text},
         {"logprobs", logprobs ? CompletionLogprobsJson(o.logprobs, prefix.size()) : json(nullptr)},
         {"finish_reason", OpenAiFinishReason(o.reason)}});
  }
  j["choices"] = std::move(choices);
  j["usage"] = Usage(outputs);
  return j;
}

json ChatChunkJson(const ResponseMeta& meta, size_t index, bool role, const std::string& text,
                   const std::vector<LogprobEntry>* logprobs, const char* finish,
                   bool include_usage, const json& tool_calls) {
  json j = Base(meta, "chat.completion.chunk");
  json delta = json::object();
  if (role) delta["role"] = "assistant";
  if (role || !text.empty() || (logprobs && !logprobs->empty())) delta["content"] = text;
  if (!tool_calls.is_null()) delta["tool_calls"] = tool_calls;
  j["choices"] = json::array({{{"index", index},
                               {"delta", delta},
                               {"logprobs", logprobs ? ChatLogprobsJson(*logprobs) : json(nullptr)},
                               {"finish_reason", finish ? json(finish) : json(nullptr)}}});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json CompletionChunkJson(const ResponseMeta& meta, size_t index, const std::string& text,
                         const std::vector<LogprobEntry>* logprobs, size_t text_offset,
                         const char* finish, bool include_usage) {
  json j = Base(meta, "text_completion");
  j["choices"] = json::array(
      {{{"index", index},
        {"text", text},
        {"logprobs", logprobs ? CompletionLogprobsJson(*logprobs, text_offset) : json(nullptr)},
        {"finish_reason", finish ? json(finish) : json(nullptr)}}});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json UsageChunkJson(const ResponseMeta& meta, bool chat, const std::vector<ChoiceOutput>& outputs) {
  json j = Base(meta, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = Usage(outputs);
  return j;
}

}  // namespace tq::server
