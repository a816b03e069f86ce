// The OpenAI-compatible HTTP front end (cpp-httplib): routes, authentication, body limits,
// request -> Scheduler submission, JSON and server-sent-event responses, /metrics.
// Model work happens only on the Scheduler's thread; HTTP threads parse, tokenize and wait.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/scheduler.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/text_model.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tq::server {

inline constexpr int kIdleConnections = 512;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (Bind returns it)
  std::string api_key;           // empty: no authentication
  std::string model_id;          // the name in /v1/models and in responses
  std::string kv_cache = "f16";  // the KV cache's description for /metrics
  int64_t context = 0;           // tokens per sequence (prompt + completion)
  size_t max_body_bytes = size_t(8) << 20;
  // HTTP threads; 0: every running and queued request plus kIdleConnections (slow or idle
  // clients each hold a thread while their request arrives).
  int http_threads = 0;
  std::string cors_origin;  // empty: no CORS headers (browsers refuse cross-origin calls)
  // One line per request on stderr: "text" (time method path status tokens ms) or "json";
  // "none" (or empty) logs nothing.
  std::string log_format = "none";
  std::string tool_parser;  // tool-call syntax (tool_calls.h names); "": from the chat template
  // More /metrics samples (the MoE expert cache's: RenderExpertCacheMetrics); called per
  // scrape from an HTTP thread, so it must be thread-safe. Empty: none.
  std::function<std::string()> extra_metrics;
};

class HttpServer {
 public:
  HttpServer(const TextModel& text, Scheduler& scheduler, ServerOptions opts);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. tq::Error ("port 8080 is in use") when the
  // address is taken or unavailable: the socket never sets SO_REUSEPORT, so a second server
  // cannot share a port with a running one.
  int Bind();
  // Serves until Stop() (from another thread or a signal handler's helper thread).
  void Serve();
  void Stop();

 private:
  void Route();
  // POST handlers get the body read by Route (within max_body_bytes, whatever the
  // Content-Type: httplib would otherwise cap form-encoded bodies at 8 KiB).
  void HandleGeneration(const std::string& body, httplib::Response& res, bool chat);
  void HandleTokenize(const std::string& body, httplib::Response& res);
  void HandleDetokenize(const std::string& body, httplib::Response& res);
  void HandleModels(const httplib::Request& req, httplib::Response& res);
  void HandleMetrics(const httplib::Request& req, httplib::Response& res);
  bool Authorized(const httplib::Request& req) const;
  void CheckModel(const std::string& model) const;

  const TextModel& text_;
  Scheduler& scheduler_;
  const ServerOptions opts_;
  const int64_t started_;  // unix seconds
  std::unique_ptr<httplib::Server> http_;
  HttpCounters counters_;
  LogFormat log_format_ = LogFormat::kNone;
};

}  // namespace tq::server
