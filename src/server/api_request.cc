#include "server/api_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace tq::server {
namespace {

using json = nlohmann::ordered_json;

// JSON type names as OpenAI's errors spell them.
std::string TypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

[[noreturn]] void WrongType(const std::string& field, const char* want, const json& v) {
  throw BadRequest(field, "'" + field + "' must be " + want + ", got " + TypeName(v));
}

// The value of `key` in `obj`, or nullptr when absent or null.
const json* Field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> GetNumber(const json& obj, const char* key, double lo, double hi) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) WrongType(key, "a number", *v);
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    throw BadRequest(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x));
  }
  return x;
}

// An integer field; a float with an integral value (1.0) is accepted as clients send those.
std::optional<int64_t> GetInt(const json& obj, const char* key, int64_t lo, int64_t hi) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    x = u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                          : int64_t(u);
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) {
      WrongType(key, "an integer", *v);
    }
    x = int64_t(d);
  } else {
    WrongType(key, "an integer", *v);
  }
  if (x < lo || x > hi) {
    throw BadRequest(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x));
  }
  return x;
}

std::optional<bool> GetBool(const json& obj, const char* key) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) WrongType(key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> GetString(const json& obj, const char* key) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) WrongType(key, "a string", *v);
  return v->get<std::string>();
}

int32_t TokenId(const json& v, const std::string& field) {
  if (!v.is_number_integer() && !v.is_number_unsigned()) WrongType(field, "an integer", v);
  if (v.is_number_unsigned()
          ? v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
          : (v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())) {
    throw BadRequest(field, "'" + field + "' is not a valid token id");
  }
  return int32_t(v.get<int64_t>());
}

std::vector<int32_t> TokenList(const json& arr, const std::string& field) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    ids.push_back(TokenId(arr[i], fmt::format("{}[{}]", field, i)));
  }
  return ids;
}

// content: a string, or an array of parts [{"type": "text", "text": ...}] joined with "\n"
// (how vLLM flattens text parts for text-only models).
std::string MessageContent(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) WrongType(field, "a string or an array of content parts", content);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string pf = fmt::format("{}[{}]", field, j);
    if (part.is_string()) {  // lenient: a bare string part
      if (!text.empty()) text += "\n";
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object()) WrongType(pf, "an object", part);
    const json* type = Field(part, "type");
    if (!type || !type->is_string())
      throw BadRequest(pf + ".type", "'" + pf + ".type' is required");
    const std::string t = type->get<std::string>();
    if (t != "text" && t != "input_text") {
      throw BadRequest(pf + ".type",
                       "content part type '" + t + "' is not supported by this text-only model");
    }
    const json* tx = Field(part, "text");
    if (!tx || !tx->is_string()) {
      throw BadRequest(pf + ".text", "'" + pf + ".text' must be a string");
    }
    if (!text.empty()) text += "\n";
    text += tx->get<std::string>();
  }
  return text;
}

json NormalizeMessages(const json& body) {
  const json* msgs = Field(body, "messages");
  if (!msgs) throw BadRequest("messages", "'messages' is required");
  if (!msgs->is_array()) WrongType("messages", "an array", *msgs);
  if (msgs->empty()) throw BadRequest("messages", "'messages' must not be empty");
  json out = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string mf = fmt::format("messages[{}]", i);
    if (!m.is_object()) WrongType(mf, "an object", m);
    const json* role = Field(m, "role");
    if (!role) throw BadRequest(mf + ".role", "'" + mf + ".role' is required");
    if (!role->is_string()) WrongType(mf + ".role", "a string", *role);
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer" &&
        r != "function") {
      throw BadRequest(mf + ".role", "'" + mf + ".role' has unknown role '" + r + "'");
    }
    json nm = m;  // keep extra keys (name, tool_calls, tool_call_id) for the template
    const json* content = Field(m, "content");
    if (content) {
      nm["content"] = MessageContent(*content, mf + ".content");
    } else if (r == "assistant" && Field(m, "tool_calls")) {
      nm["content"] = "";
    } else {
      throw BadRequest(mf + ".content", "'" + mf + ".content' is required");
    }
    nm["role"] = r == "developer" ? "system" : r;
    out.push_back(std::move(nm));
  }
  return out;
}

std::vector<std::string> ParseStop(const json& body) {
  const json* v = Field(body, "stop");
  std::vector<std::string> stop;
  if (!v) return stop;
  auto add = [&](const std::string& field, const std::string& str) {
    if (str.size() > kMaxStopBytes) {
      throw BadRequest(field, fmt::format("'{}' is longer than {} bytes", field, kMaxStopBytes));
    }
    if (!str.empty()) stop.push_back(str);
  };
  if (v->is_string()) {
    add("stop", v->get<std::string>());
    return stop;
  }
  if (!v->is_array()) WrongType("stop", "a string or an array of strings", *v);
  if (v->size() > size_t(kMaxStopStrings)) {
    throw BadRequest("stop", fmt::format("'stop' has at most {} strings", kMaxStopStrings));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) WrongType(fmt::format("stop[{}]", i), "a string", (*v)[i]);
    add(fmt::format("stop[{}]", i), (*v)[i].get<std::string>());
  }
  return stop;
}

// Fields this server does not implement: a 400 naming them, never a 200 that ignores them.
// (Fields that cannot change the output, such as user, store, metadata or service_tier, are
// accepted and ignored.)
void RejectUnsupported(const json& body, Endpoint ep) {
  auto present = [&](const char* k) { return Field(body, k) != nullptr; };
  if (const json* lb = Field(body, "logit_bias"); lb && !(lb->is_object() && lb->empty())) {
    throw BadRequest("logit_bias", "'logit_bias' is not supported");
  }
  for (const char* k : {"functions", "function_call"}) {
    if (present(k)) {
      throw BadRequest(k, std::string("'") + k +
                              "' (the deprecated functions API) is not supported; use 'tools' "
                              "and 'tool_choice'");
    }
  }
  for (const char* k : {"audio", "prediction", "web_search_options"}) {
    if (present(k)) throw BadRequest(k, std::string("'") + k + "' is not supported");
  }
  if (const json* m = Field(body, "modalities");
      m && !(m->is_array() && m->size() == 1 && (*m)[0] == "text")) {
    throw BadRequest("modalities", "'modalities' other than [\"text\"] is not supported");
  }
  if (ep == Endpoint::kCompletion) {
    for (const char* k : {"response_format", "tools", "tool_choice"}) {
      if (present(k)) {
        throw BadRequest(k, std::string("'") + k + "' is supported on /v1/chat/completions only");
      }
    }
  }
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}].
void ValidateTools(const json& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string f = fmt::format("tools[{}]", i);
    if (!t.is_object()) WrongType(f, "an object", t);
    const json* type = Field(t, "type");
    if (!type || *type != "function") {
      throw BadRequest(f + ".type", "'" + f + ".type' must be \"function\"");
    }
    const json* fn = Field(t, "function");
    if (!fn) throw BadRequest(f + ".function", "'" + f + ".function' is required");
    if (!fn->is_object()) WrongType(f + ".function", "an object", *fn);
    const json* name = Field(*fn, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty()) {
      throw BadRequest(f + ".function.name",
                       "'" + f + ".function.name' must be a non-empty string");
    }
    if (const json* p = Field(*fn, "parameters"); p && !p->is_object()) {
      WrongType(f + ".function.parameters", "an object", *p);
    }
  }
}

void ParseToolChoice(const json& body, GenerationRequest& r) {
  if (auto v = GetBool(body, "parallel_tool_calls")) r.parallel_tool_calls = *v;
  const json* tc = Field(body, "tool_choice");
  if (!tc) return;
  const size_t ntools = r.tools.is_array() ? r.tools.size() : 0;
  if (tc->is_string()) {
    const std::string v = tc->get<std::string>();
    if (v == "auto") {
      r.tool_choice = ToolChoice::kAuto;
    } else if (v == "none") {
      r.tool_choice = ToolChoice::kNone;
    } else if (v == "required") {
      r.tool_choice = ToolChoice::kRequired;
    } else {
      throw BadRequest("tool_choice",
                       "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"" +
                           v + "\"");
    }
  } else if (tc->is_object()) {
    const json* fn = Field(*tc, "function");
    const json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
    if (!name || !name->is_string()) {
      throw BadRequest("tool_choice.function.name", "'tool_choice.function.name' is required");
    }
    size_t i = 0;
    for (; i < ntools; ++i) {
      if (r.tools[i]["function"]["name"] == *name) break;
    }
    if (i == ntools) {
      throw BadRequest("tool_choice.function.name", "'tool_choice' names the function '" +
                                                        name->get<std::string>() +
                                                        "', which is not in 'tools'");
    }
    r.tool_choice = ToolChoice::kFunction;
    r.tool_choice_index = i;
  } else {
    WrongType("tool_choice", "a string or an object", *tc);
  }
  if ((r.tool_choice == ToolChoice::kRequired) && ntools == 0) {
    throw BadRequest("tool_choice",
                     "'tool_choice' \"required\" needs at least one entry in 'tools'");
  }
}

void ParseResponseFormat(const json& body, GenerationRequest& r) {
  const json* rf = Field(body, "response_format");
  if (!rf) return;
  if (!rf->is_object()) WrongType("response_format", "an object", *rf);
  const std::string type = GetString(*rf, "type").value_or("");
  if (type == "text") {
    r.response_format = ResponseFormat::kText;
  } else if (type == "json_object") {
    r.response_format = ResponseFormat::kJsonObject;
  } else if (type == "json_schema") {
    const json* js = Field(*rf, "json_schema");
    if (!js || !js->is_object()) {
      throw BadRequest("response_format.json_schema",
                       "'response_format.json_schema' must be an object with a 'schema'");
    }
    const json* schema = Field(*js, "schema");
    if (!schema || !(schema->is_object() || schema->is_boolean())) {
      throw BadRequest("response_format.json_schema.schema",
                       "'response_format.json_schema.schema' must be a JSON Schema object");
    }
    r.response_format = ResponseFormat::kJsonSchema;
    r.json_schema = *schema;
  } else {
    throw BadRequest("response_format.type",
                     "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  }
}

// The fields chat and completions share.
void ParseCommon(const json& body, GenerationRequest& r) {
  RejectUnsupported(body, r.endpoint);
  if (auto m = GetString(body, "model")) r.model = *m;
  if (auto n = GetInt(body, "n", 1, kMaxChoices)) r.n = int(*n);
  if (auto b = GetInt(body, "best_of", 1, kMaxChoices); b && *b != r.n) {
    throw BadRequest("best_of", "'best_of' other than 'n' is not supported");
  }
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (auto v = GetInt(body, "max_tokens", 1, kMaxInt)) r.max_tokens = *v;
  if (auto v = GetInt(body, "max_completion_tokens", 1, kMaxInt)) r.max_tokens = *v;
  SamplingRequest& s = r.sampling;
  s.temperature = GetNumber(body, "temperature", 0.0, 2.0);
  s.top_p = GetNumber(body, "top_p", 0.0, 1.0);
  if (s.top_p && *s.top_p <= 0.0) throw BadRequest("top_p", "'top_p' must be greater than 0");
  s.top_k = GetInt(body, "top_k", -1, kMaxInt);
  if (s.top_k && *s.top_k < 0) s.top_k = 0;  // vLLM: -1 = off
  s.min_p = GetNumber(body, "min_p", 0.0, 1.0);
  s.presence_penalty = GetNumber(body, "presence_penalty", -2.0, 2.0);
  s.frequency_penalty = GetNumber(body, "frequency_penalty", -2.0, 2.0);
  s.repetition_penalty = GetNumber(body, "repetition_penalty", 0.0, 10.0);
  if (s.repetition_penalty && *s.repetition_penalty <= 0.0) {
    throw BadRequest("repetition_penalty", "'repetition_penalty' must be > 0");
  }
  if (const json* v = Field(body, "seed")) {
    if (v->is_number_integer()) {
      s.seed = uint64_t(v->get<int64_t>());
    } else if (v->is_number_unsigned()) {
      s.seed = v->get<uint64_t>();
    } else {
      WrongType("seed", "an integer", *v);
    }
  }
  r.stop = ParseStop(body);
  if (auto v = GetBool(body, "ignore_eos")) r.ignore_eos = *v;
  if (auto v = GetBool(body, "stream")) r.stream = *v;
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) WrongType("stream_options", "an object", *so);
    if (const json* iu = Field(*so, "include_usage")) {
      if (!iu->is_boolean()) WrongType("stream_options.include_usage", "a boolean", *iu);
      r.include_usage = iu->get<bool>();
    }
  }
}

}  // namespace

tq::SamplingParams ResolveSampling(const SamplingRequest& req, const tq::SamplingParams& defaults,
                                   uint64_t random_seed) {
  tq::SamplingParams p = defaults;
  if (req.temperature) p.temperature = float(*req.temperature);
  if (req.top_p) p.top_p = float(*req.top_p);
  if (req.top_k) p.top_k = int32_t(std::min<int64_t>(*req.top_k, 1 << 30));
  if (req.min_p) p.min_p = float(*req.min_p);
  if (req.presence_penalty) p.presence_penalty = float(*req.presence_penalty);
  if (req.frequency_penalty) p.frequency_penalty = float(*req.frequency_penalty);
  if (req.repetition_penalty) p.repetition_penalty = float(*req.repetition_penalty);
  p.seed = req.seed ? *req.seed : random_seed;
  return p;
}

json ParseJsonBody(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Re-parse with exceptions only to get the position of the error for the message.
    std::string why = "invalid JSON";
    try {
      json again = json::parse(body);
      (void)again;
    } catch (const json::exception& e) {
      why = e.what();
    }
    throw ApiError(400, "invalid_request_error", "Request body is not valid JSON: " + why, "",
                   "invalid_json");
  }
  if (!j.is_object()) {
    throw ApiError(400, "invalid_request_error",
                   "Request body must be a JSON object, got " + TypeName(j), "", "invalid_json");
  }
  return j;
}

GenerationRequest ParseChatRequest(const json& body) {
  GenerationRequest r;
  r.endpoint = Endpoint::kChat;
  r.messages = NormalizeMessages(body);
  ParseCommon(body, r);
  if (const json* t = Field(body, "tools")) {
    if (!t->is_array()) WrongType("tools", "an array", *t);
    ValidateTools(*t);
    r.tools = *t;  // [] stays []: the template sees an empty list, not None
  }
  ParseToolChoice(body, r);
  ParseResponseFormat(body, r);
  if (const json* k = Field(body, "chat_template_kwargs")) {
    if (!k->is_object()) WrongType("chat_template_kwargs", "an object", *k);
    r.template_kwargs = *k;
  }
  if (auto v = GetBool(body, "add_generation_prompt")) r.add_generation_prompt = *v;
  if (auto v = GetBool(body, "logprobs")) r.logprobs = *v;
  if (auto v = GetInt(body, "top_logprobs", 0, kMaxTopLogprobs)) {
    if (!r.logprobs && *v > 0) {
      throw BadRequest("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    }
    r.top_logprobs = int(*v);
  }
  return r;
}

GenerationRequest ParseCompletionRequest(const json& body) {
  GenerationRequest r;
  r.endpoint = Endpoint::kCompletion;
  const json* p = Field(body, "prompt");
  if (!p) throw BadRequest("prompt", "'prompt' is required");
  auto text_prompt = [](std::string s) {
    Prompt pr;
    pr.text = std::move(s);
    return pr;
  };
  auto token_prompt = [](std::vector<int32_t> ids) {
    Prompt pr;
    pr.tokens = std::move(ids);
    pr.is_tokens = true;
    return pr;
  };
  if (p->is_string()) {
    r.prompts.push_back(text_prompt(p->get<std::string>()));
  } else if (p->is_array()) {
    if (p->empty()) throw BadRequest("prompt", "'prompt' must not be empty");
    if ((*p)[0].is_number()) {  // one prompt as token ids
      r.prompts.push_back(token_prompt(TokenList(*p, "prompt")));
    } else {
      if (p->size() > size_t(kMaxPrompts)) {
        throw BadRequest("prompt", fmt::format("'prompt' has at most {} prompts", kMaxPrompts));
      }
      for (size_t i = 0; i < p->size(); ++i) {
        const json& e = (*p)[i];
        const std::string f = fmt::format("prompt[{}]", i);
        if (e.is_string()) {
          r.prompts.push_back(text_prompt(e.get<std::string>()));
        } else if (e.is_array()) {
          if (e.empty()) throw BadRequest(f, "'" + f + "' must not be empty");
          r.prompts.push_back(token_prompt(TokenList(e, f)));
        } else {
          WrongType(f, "a string or an array of token ids", e);
        }
      }
    }
  } else {
    WrongType("prompt", "a string or an array", *p);
  }
  ParseCommon(body, r);
  if (r.prompts.size() * size_t(r.n) > size_t(kMaxChoices)) {
    throw BadRequest("n", fmt::format("prompts x 'n' is {}; at most {} choices per request",
                                      r.prompts.size() * size_t(r.n), kMaxChoices));
  }
  if (auto v = GetBool(body, "echo")) r.echo = *v;
  if (auto v = GetInt(body, "logprobs", 0, kMaxTopLogprobs)) {
    r.logprobs = true;
    r.top_logprobs = int(*v);
  }
  if (const json* s = Field(body, "suffix");
      s && !(s->is_string() && s->get<std::string>().empty())) {
    throw BadRequest("suffix", "'suffix' is not supported");
  }
  return r;
}

TokenizeRequest ParseTokenizeRequest(const json& body) {
  TokenizeRequest r;
  if (Field(body, "messages")) {
    r.has_messages = true;
    r.messages = NormalizeMessages(body);
    r.add_special = false;
  } else if (auto c = GetString(body, "content")) {
    r.text = *c;
  } else if (auto p = GetString(body, "prompt")) {
    r.text = *p;
  } else {
    throw BadRequest("content", "'content' (or 'prompt' or 'messages') is required");
  }
  if (auto v = GetBool(body, "add_special")) r.add_special = *v;
  if (auto v = GetBool(body, "add_special_tokens")) r.add_special = *v;
  if (auto v = GetBool(body, "with_pieces")) r.with_pieces = *v;
  return r;
}

std::vector<int32_t> ParseDetokenizeRequest(const json& body) {
  const json* t = Field(body, "tokens");
  if (!t) throw BadRequest("tokens", "'tokens' is required");
  if (!t->is_array()) WrongType("tokens", "an array of token ids", *t);
  return TokenList(*t, "tokens");
}

}  // namespace tq::server
