#include "server/tool_calls.h"

#include <mutex>
#include <random>

namespace tq::server {
namespace {

using json = nlohmann::ordered_json;

// Markers as the tokenizers' special tokens spell them.
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]",
                           kMistralCallId = "[CALL_ID]";
constexpr std::string_view kHarmonyMessage = "<|message|>", kHarmonyChannel = "<|channel|>",
                           kHarmonyStart = "<|start|>", kHarmonyTo = "to=functions.";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>",
                           kDsCallsEnd = "<｜tool▁calls▁end｜>",
                           kDsCallBegin = "<｜tool▁call▁begin｜>",
                           kDsCallEnd = "<｜tool▁call▁end｜>", kDsSep = "<｜tool▁sep｜>";

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string_view::npos) return {};
  const size_t b = s.find_last_not_of(ws);
  return s.substr(a, b - a + 1);
}

void AppendContent(std::string& to, std::string_view piece) { to.append(piece); }

// The end (one past) of the JSON value that starts at s[pos] ('{' or '['), by bracket balance
// outside strings; npos when it does not close.
size_t JsonEnd(std::string_view s, size_t pos) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_str) {
      if (esc) {
        esc = false;
      } else if (c == '\\') {
        esc = true;
      } else if (c == '"') {
        in_str = false;
      }
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<json> ParseJson(std::string_view s) {
  json j = json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Arguments as a compact JSON object text: an object, or a string holding one.
std::optional<std::string> ArgumentsText(const json& v) {
  if (v.is_object()) return v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (v.is_string()) {
    auto inner = ParseJson(v.get<std::string>());
    if (inner && inner->is_object())
      return inner->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return std::nullopt;
}

// {"name": N, "arguments" | "parameters": {...}}; arguments may be absent ({}).
std::optional<ToolCall> CallFromObject(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return std::nullopt;
  ToolCall c;
  c.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end()) {
    c.arguments = "{}";
  } else if (auto t = ArgumentsText(*args)) {
    c.arguments = *t;
  } else {
    return std::nullopt;
  }
  return c;
}

// One or more call objects: `{...}`, `{...}; {...}` or `[{...}, ...]`. All must parse.
std::optional<std::vector<ToolCall>> CallList(std::string_view s) {
  s = Trim(s);
  std::vector<ToolCall> calls;
  if (s.empty()) return std::nullopt;
  if (s[0] == '[') {
    auto arr = ParseJson(s);
    if (!arr || !arr->is_array() || arr->empty()) return std::nullopt;
    for (const auto& e : *arr) {
      auto c = CallFromObject(e);
      if (!c) return std::nullopt;
      calls.push_back(std::move(*c));
    }
    return calls;
  }
  size_t pos = 0;
  while (pos < s.size()) {
    if (s[pos] != '{') return std::nullopt;
    const size_t end = JsonEnd(s, pos);
    if (end == std::string_view::npos) return std::nullopt;
    auto obj = ParseJson(s.substr(pos, end - pos));
    if (!obj) return std::nullopt;
    auto c = CallFromObject(*obj);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    std::string_view rest = Trim(s.substr(end));
    if (rest.empty()) break;
    if (rest[0] != ';') return std::nullopt;
    rest = Trim(rest.substr(1));
    if (rest.empty()) break;
    pos = size_t(rest.data() - s.data());
  }
  return calls;
}

ParsedReply TextOnly(std::string_view text) {
  ParsedReply r;
  r.content = std::string(Trim(text));
  return r;
}

ParsedReply ParseHermes(std::string_view text) {
  ParsedReply r;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    AppendContent(r.content, text.substr(pos, open - pos));
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const std::string_view inner =
        text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
    const size_t next = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
    auto obj = ParseJson(Trim(inner));
    std::optional<ToolCall> call = obj ? CallFromObject(*obj) : std::nullopt;
    if (call) {
      r.calls.push_back(std::move(*call));
    } else {
      AppendContent(r.content, text.substr(open, next - open));  // malformed: stays text
    }
    pos = next;
  }
  AppendContent(r.content, text.substr(std::min(pos, text.size())));
  r.content = std::string(Trim(r.content));
  return r;
}

ParsedReply ParseLlama3(std::string_view text) {
  const size_t tag = text.find(kPythonTag);
  std::string_view before, calls_text = text;
  if (tag != std::string_view::npos) {
    before = text.substr(0, tag);
    calls_text = text.substr(tag + kPythonTag.size());
  } else if (Trim(text).empty() || Trim(text)[0] != '{') {
    return TextOnly(text);
  }
  auto calls = CallList(calls_text);
  if (!calls) return TextOnly(text);
  ParsedReply r;
  r.content = std::string(Trim(before));
  r.calls = std::move(*calls);
  return r;
}

ParsedReply ParseMistral(std::string_view text) {
  const size_t mark = text.find(kMistralCalls);
  if (mark == std::string_view::npos) return TextOnly(text);
  ParsedReply r;
  r.content = std::string(Trim(text.substr(0, mark)));
  std::string_view rest = Trim(text.substr(mark + kMistralCalls.size()));
  if (!rest.empty() && (rest[0] == '[' || rest[0] == '{')) {
    auto calls = CallList(rest);
    if (!calls) return TextOnly(text);
    r.calls = std::move(*calls);
    return r;
  }
  // [TOOL_CALLS]name[ARGS]{...} (optionally [CALL_ID]id before [ARGS]), repeated.
  while (!rest.empty()) {
    const size_t args = rest.find(kMistralArgs);
    if (args == std::string_view::npos) return TextOnly(text);
    std::string_view name = rest.substr(0, args);
    if (size_t id = name.find(kMistralCallId); id != std::string_view::npos)
      name = name.substr(0, id);
    name = Trim(name);
    const size_t start = args + kMistralArgs.size();
    const size_t obj_at = rest.find('{', start);
    if (name.empty() || obj_at == std::string_view::npos ||
        !Trim(rest.substr(start, obj_at - start)).empty()) {
      return TextOnly(text);
    }
    const size_t end = JsonEnd(rest, obj_at);
    if (end == std::string_view::npos) return TextOnly(text);
    auto obj = ParseJson(rest.substr(obj_at, end - obj_at));
    auto a = obj ? ArgumentsText(*obj) : std::nullopt;
    if (!a) return TextOnly(text);
    r.calls.push_back({std::string(name), *a});
    rest = Trim(rest.substr(end));
    if (rest.rfind(kMistralCalls, 0) == 0) rest = Trim(rest.substr(kMistralCalls.size()));
  }
  return r;
}

ParsedReply ParseHarmony(std::string_view text) {
  if (text.find(kHarmonyMessage) == std::string_view::npos) return TextOnly(text);
  ParsedReply r;
  size_t pos = 0;
  static constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
  while (pos < text.size()) {
    const size_t msg = text.find(kHarmonyMessage, pos);
    if (msg == std::string_view::npos) {
      r.content.append(text.substr(pos));  // trailing text without a header
      break;
    }
    const std::string_view header = text.substr(pos, msg - pos);
    const size_t body = msg + kHarmonyMessage.size();
    size_t end = text.size(), next = text.size();
    for (std::string_view e : kEnds) {
      const size_t at = text.find(e, body);
      if (at < end) {
        end = at;
        next = e == kHarmonyStart ? at : at + e.size();
      }
    }
    const std::string_view content = text.substr(body, end - body);
    std::string channel;
    if (size_t c = header.find(kHarmonyChannel); c != std::string_view::npos) {
      std::string_view ch = header.substr(c + kHarmonyChannel.size());
      const size_t stop = ch.find_first_of(" <");
      channel = std::string(ch.substr(0, stop));
    }
    if (size_t to = header.find(kHarmonyTo); to != std::string_view::npos) {
      std::string_view name = header.substr(to + kHarmonyTo.size());
      name = name.substr(0, name.find_first_of(" <\t\n"));
      auto obj = ParseJson(Trim(content));
      auto a = obj ? ArgumentsText(*obj) : std::nullopt;
      if (!name.empty() && a) {
        r.calls.push_back({std::string(name), *a});
      } else {
        r.content.append(text.substr(pos, next - pos));  // malformed call: stays text
      }
    } else if (channel == "analysis") {
      r.reasoning.append(content);
    } else {
      r.content.append(content);  // final (or a commentary preamble)
    }
    pos = next;
  }
  r.content = std::string(Trim(r.content));
  r.reasoning = std::string(Trim(r.reasoning));
  return r;
}

ParsedReply ParseDeepSeek(std::string_view text) {
  size_t begin = text.find(kDsCallsBegin);
  size_t first = begin == std::string_view::npos ? text.find(kDsCallBegin) : begin;
  if (first == std::string_view::npos) return TextOnly(text);
  ParsedReply r;
  r.content = std::string(Trim(text.substr(0, first)));
  size_t pos = first;
  while (true) {
    const size_t call = text.find(kDsCallBegin, pos);
    if (call == std::string_view::npos) break;
    const size_t body = call + kDsCallBegin.size();
    const size_t close = text.find(kDsCallEnd, body);
    const std::string_view inner =
        text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
    const size_t sep = inner.find(kDsSep);
    if (sep == std::string_view::npos) return TextOnly(text);
    std::string_view left = Trim(inner.substr(0, sep)), right = inner.substr(sep + kDsSep.size());
    std::string_view name, args;
    if (left == "function") {  // V3: function<sep>NAME\n```json\n{...}\n```
      const size_t nl = right.find('\n');
      name = Trim(right.substr(0, nl));
      std::string_view rest = nl == std::string_view::npos ? std::string_view() : right.substr(nl);
      rest = Trim(rest);
      if (rest.rfind("```json", 0) == 0) rest = rest.substr(7);
      if (size_t fence = rest.rfind("```"); fence != std::string_view::npos)
        rest = rest.substr(0, fence);
      args = Trim(rest);
    } else {  // V3.1: NAME<sep>{...}
      name = left;
      args = Trim(right);
    }
    auto obj = ParseJson(args);
    auto a = obj ? ArgumentsText(*obj) : std::nullopt;
    if (name.empty() || !a) return TextOnly(text);
    r.calls.push_back({std::string(name), *a});
    if (close == std::string_view::npos) {
      pos = text.size();
      break;
    }
    pos = close + kDsCallEnd.size();
  }
  if (size_t end = text.find(kDsCallsEnd, pos); end != std::string_view::npos) {
    pos = end + kDsCallsEnd.size();
  }
  const std::string_view after = Trim(text.substr(std::min(pos, text.size())));
  if (!after.empty()) {
    if (!r.content.empty()) r.content += "\n";
    r.content.append(after);
  }
  return r;
}

ParsedReply ParseJsonCall(std::string_view text) {
  const std::string_view t = Trim(text);
  if (t.empty() || (t[0] != '{' && t[0] != '[')) return TextOnly(text);
  auto calls = CallList(t);
  if (!calls) return TextOnly(text);
  ParsedReply r;
  r.calls = std::move(*calls);
  return r;
}

// Where a family's calls start; npos when not (yet) in `s`.
std::vector<std::string_view> StartMarkers(ToolFamily f) {
  switch (f) {
    case ToolFamily::kHermes:
      return {kHermesOpen};
    case ToolFamily::kLlama3:
      return {kPythonTag};
    case ToolFamily::kMistral:
      return {kMistralCalls};
    case ToolFamily::kHarmony:
      return {kHarmonyChannel, kHarmonyStart, kHarmonyMessage};
    case ToolFamily::kDeepSeek:
      return {kDsCallsBegin, kDsCallBegin};
    default:
      return {};
  }
}

}  // namespace

const char* ToolFamilyName(ToolFamily f) {
  switch (f) {
    case ToolFamily::kNone:
      return "none";
    case ToolFamily::kJson:
      return "json";
    case ToolFamily::kHermes:
      return "hermes";
    case ToolFamily::kLlama3:
      return "llama3";
    case ToolFamily::kMistral:
      return "mistral";
    case ToolFamily::kHarmony:
      return "harmony";
    case ToolFamily::kDeepSeek:
      return "deepseek";
  }
  return "none";
}

std::optional<ToolFamily> ParseToolFamily(std::string_view n) {
  if (n == "none") return ToolFamily::kNone;
  if (n == "json") return ToolFamily::kJson;
  if (n == "hermes" || n == "qwen") return ToolFamily::kHermes;
  if (n == "llama3" || n == "llama") return ToolFamily::kLlama3;
  if (n == "mistral") return ToolFamily::kMistral;
  if (n == "harmony" || n == "gpt-oss") return ToolFamily::kHarmony;
  if (n == "deepseek") return ToolFamily::kDeepSeek;
  return std::nullopt;
}

ToolFamily DetectToolFamily(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<tool_call>")) return ToolFamily::kHermes;
  if (has("[TOOL_CALLS]")) return ToolFamily::kMistral;
  if (has("<|channel|>")) return ToolFamily::kHarmony;
  if (has("tool▁call")) return ToolFamily::kDeepSeek;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) {
    return ToolFamily::kLlama3;
  }
  return ToolFamily::kJson;
}

ParsedReply ParseToolCalls(ToolFamily family, std::string_view text) {
  switch (family) {
    case ToolFamily::kHermes:
      return ParseHermes(text);
    case ToolFamily::kLlama3:
      return ParseLlama3(text);
    case ToolFamily::kMistral:
      return ParseMistral(text);
    case ToolFamily::kHarmony:
      return ParseHarmony(text);
    case ToolFamily::kDeepSeek:
      return ParseDeepSeek(text);
    case ToolFamily::kJson:
      return ParseJsonCall(text);
    case ToolFamily::kNone:
      break;
  }
  ParsedReply r;
  r.content = std::string(text);
  return r;
}

ToolCallStream::Delta ToolCallStream::Push(std::string_view text) {
  pending_.append(text);
  return Scan(false);
}

ToolCallStream::Delta ToolCallStream::Finish() { return Scan(true); }

ToolCallStream::Delta ToolCallStream::Scan(bool final) {
  Delta d;
  if (family_ == ToolFamily::kNone) {
    d.content = std::move(pending_);
    pending_.clear();
    return d;
  }
  if (!in_calls_) {
    const bool json_start = family_ == ToolFamily::kJson || family_ == ToolFamily::kLlama3;
    if (at_start_ && json_start) {
      const std::string_view t = Trim(pending_);
      if (t.empty() && !final) return d;  // only whitespace so far
      if (!t.empty() && (t[0] == '{' || t[0] == '[')) in_calls_ = true;
      at_start_ = false;
    }
    if (!in_calls_) {
      size_t at = std::string::npos;
      for (std::string_view m : StartMarkers(family_)) at = std::min(at, pending_.find(m));
      if (at != std::string::npos) {
        d.content = pending_.substr(0, at);
        pending_.erase(0, at);
        in_calls_ = true;
      } else {
        // Hold back the longest tail that could begin a marker.
        size_t keep = 0;
        if (!final) {
          for (std::string_view m : StartMarkers(family_)) {
            for (size_t k = std::min(m.size() - 1, pending_.size()); k > keep; --k) {
              if (pending_.compare(pending_.size() - k, k, m.substr(0, k)) == 0) {
                keep = k;
                break;
              }
            }
          }
        }
        d.content = pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return d;
      }
    }
  }
  if (final) {
    ParsedReply r = ParseToolCalls(family_, pending_);
    if (!d.content.empty() && !r.content.empty()) d.content += "\n";
    d.content += r.content;
    for (size_t i = released_; i < r.calls.size(); ++i) d.calls.push_back(std::move(r.calls[i]));
    released_ = std::max(released_, r.calls.size());
    pending_.clear();
    return d;
  }
  // Hermes calls are released as each </tool_call> arrives.
  if (family_ == ToolFamily::kHermes) {
    const size_t close = pending_.rfind(kHermesClose);
    if (close != std::string::npos) {
      ParsedReply r =
          ParseHermes(std::string_view(pending_).substr(0, close + kHermesClose.size()));
      for (size_t i = released_; i < r.calls.size(); ++i) d.calls.push_back(std::move(r.calls[i]));
      released_ = std::max(released_, r.calls.size());
    }
  }
  return d;
}

std::string NewToolCallId(ToolFamily family) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const size_t n = family == ToolFamily::kMistral ? 9 : 24;
  std::string id = family == ToolFamily::kMistral ? "" : "call_";
  std::lock_guard lk(mu);
  for (size_t i = 0; i < n; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

json PrepareToolMessages(ToolFamily family, json messages) {
  if (family == ToolFamily::kDeepSeek || !messages.is_array()) return messages;
  for (auto& m : messages) {
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (auto& c : *calls) {
      if (!c.is_object()) continue;
      auto fn = c.find("function");
      if (fn == c.end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      if (args == fn->end() || !args->is_string()) continue;
      auto parsed = ParseJson(args->get<std::string>());
      if (parsed && parsed->is_object()) *args = *parsed;
    }
  }
  return messages;
}

}  // namespace tq::server
