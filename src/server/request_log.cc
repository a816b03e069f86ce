#include "server/request_log.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

namespace tq::server {
namespace {

struct Pending {
  bool active = false;
  std::chrono::steady_clock::time_point start;
  int64_t prompt = 0, completion = 0;
};
thread_local Pending pending;

// ISO 8601 UTC with milliseconds.
std::string IsoTime(int64_t unix_ms) {
  const std::time_t s = std::time_t(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     int(unix_ms % 1000));
}

}  // namespace

bool ParseLogFormat(const std::string& name, LogFormat* out) {
  if (name.empty() || name == "none") {
    *out = LogFormat::kNone;
  } else if (name == "text") {
    *out = LogFormat::kText;
  } else if (name == "json") {
    *out = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

std::string FormatRequestLog(const RequestLogLine& l, LogFormat format) {
  if (format == LogFormat::kJson) {
    const nlohmann::json j = {{"time", IsoTime(l.unix_ms)},
                              {"method", l.method},
                              {"path", l.path},
                              {"status", l.status},
                              {"prompt_tokens", l.prompt_tokens},
                              {"completion_tokens", l.completion_tokens},
                              {"ms", std::round(l.ms * 10) / 10}};
    // replace: a path is client bytes, and may not be UTF-8.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string path;  // client bytes: control characters escaped so one request is one line
  for (unsigned char c : l.path) {
    if (c < 0x20 || c == 0x7f || c == ' ') {
      path += fmt::format("%{:02X}", c);
    } else {
      path += char(c);
    }
  }
  return fmt::format("{} {} {} {} prompt={} completion={} {:.1f}ms", IsoTime(l.unix_ms), l.method,
                     path, l.status, l.prompt_tokens, l.completion_tokens, l.ms);
}

void RequestLogBegin() { pending = Pending{true, std::chrono::steady_clock::now(), 0, 0}; }

void RequestLogAddTokens(int64_t prompt, int64_t completion) {
  pending.prompt += prompt;
  pending.completion += completion;
}

void RequestLogFinish(RequestLogLine* line) {
  line->prompt_tokens = pending.prompt;
  line->completion_tokens = pending.completion;
  line->ms = pending.active ? std::chrono::duration<double, std::milli>(
                                  std::chrono::steady_clock::now() - pending.start)
                                  .count()
                            : 0;
  line->unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  pending = Pending{};
}

}  // namespace tq::server
