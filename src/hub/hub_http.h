// HTTP for the hub, on libcurl: GET with redirects followed (at most a few), byte ranges, a bearer
// token, timeouts, and the response headers of every hop (the hub puts X-Repo-Commit and
// X-Linked-Etag / X-Linked-Size on the redirect, the CDN answers the file).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace tq::hub {

// The connection failed or was cut (refused, reset, timed out, a body shorter than announced):
// worth another attempt, resuming. Everything else (an answer that contradicts what was asked) is
// a plain tq::Error.
class HttpTransportError : public Error {
 public:
  using Error::Error;
};

struct HttpSettings {
  std::string token;      // "Authorization: Bearer <token>" (never sent to another host)
  int max_redirects = 5;  // more is an error ("too many redirects")
  long connect_timeout_s = 20;
  long stall_timeout_s = 60;  // abort a transfer that moves < 1 byte/s for this long
  std::string user_agent = "turboquant";
};

struct HttpHop {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names; last value wins
};

struct HttpResponse {
  long status = 0;            // of the final hop
  std::vector<HttpHop> hops;  // every response, redirects first
  std::string url;            // the final URL
  int64_t body_bytes = 0;     // body bytes received (final hop)
  std::string error_body;     // the start (4 KiB) of a non-2xx answer's body, for messages
  // A header of the final hop, else of an earlier hop ("" when none has it). `name` lower-case.
  std::string Header(const std::string& name) const;
};

// A byte range [begin, end] (end inclusive; -1 = to the end of the file). begin < 0: no range.
struct ByteRange {
  int64_t begin = -1, end = -1;
};

// Returns false to stop the transfer (the call then throws "[where] stopped").
using BodySink = std::function<bool(const char* data, size_t n)>;
// Called once, before the first body byte of a 2xx answer, with the headers of every hop so far:
// returns "" to go on, else the reason to stop (Get then throws it, prefixed with the URL).
using StartHook = std::function<std::string(const HttpResponse& headers)>;

class HttpClient {
 public:
  explicit HttpClient(HttpSettings settings);
  // GET `url`; the body goes to `sink` only for a 2xx final status (error bodies are kept, up to
  // 4 KiB, for the message). Transport failures (refused, reset, timeout, too many redirects, a
  // body shorter than its Content-Length) throw tq::Error("[hub GET <url>] ..."). HTTP error
  // statuses are returned, not thrown: callers say what a 401 or 404 means for them.
  HttpResponse Get(const std::string& url, ByteRange range, const BodySink& sink,
                   const StartHook& on_start = nullptr);
  // GET a small document (JSON) whole: at most `max_bytes`, else an error.
  HttpResponse GetText(const std::string& url, std::string* body, size_t max_bytes = 64 << 20);
  // Body bytes this client received, all calls together (plan reports what it read). Get may be
  // called from several threads at once.
  int64_t body_bytes() const { return body_bytes_.load(); }

 private:
  HttpSettings s_;
  std::atomic<int64_t> body_bytes_{0};
};

// Percent-encodes `s` for a URL path segment; '/' is kept when `keep_slash`.
std::string UrlEncode(const std::string& s, bool keep_slash);

}  // namespace tq::hub
