// One line per HTTP request on stderr (serve --log-format text|json): time, method, path,
// status, prompt and completion tokens, milliseconds from the request line to the last byte.
//
// httplib runs a request's routing, handler and response writing (streamed chunks included) on
// one thread, so the per-request figures live in a thread_local record: Begin() at routing,
// AddTokens() from the handlers, and the logger callback formats and clears it.
#pragma once

#include <cstdint>
#include <string>

namespace tq::server {

enum class LogFormat { kNone, kText, kJson };

// "none" | "text" | "json" (empty = none) into *out; false for anything else.
bool ParseLogFormat(const std::string& name, LogFormat* out);

struct RequestLogLine {
  int64_t unix_ms = 0;  // wall clock at the end of the request
  std::string method, path;
  int status = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double ms = 0;  // request start -> response written
};

// text: "2026-12-01T20:55:01.123Z POST /v1/chat/completions 200 prompt=12 completion=40 85.2ms"
// json: {"time":"...","method":"POST","path":"...","status":200,"prompt_tokens":12,...}
std::string FormatRequestLog(const RequestLogLine& line, LogFormat format);

// The calling thread's request in progress.
void RequestLogBegin();
void RequestLogAddTokens(int64_t prompt, int64_t completion);
// Fills tokens and ms of `line` from the thread's record (ms = 0 if Begin was not called).
void RequestLogFinish(RequestLogLine* line);

}  // namespace tq::server
