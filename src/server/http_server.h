// The OpenAI-compatible HTTP front end (cpp-httplib): routes, authentication, body limits,
// request -> Scheduler submission, JSON and server-sent-event responses, /metrics.
// Model work happens only on the Scheduler's thread; HTTP threads parse, tokenize and wait.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/text_model.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tq::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (Bind returns it)
  std::string api_key;           // empty: no authentication
  std::string model_id;          // the name in /v1/models and in responses
  std::string kv_cache = "f16";  // the KV cache's description for /metrics
  int64_t context = 0;           // tokens per sequence (prompt + completion)
  size_t max_body_bytes = size_t(8) << 20;
  int http_threads = 0;  // 0: enough for every running and queued request plus idle keep-alives
  std::string tool_parser;  // tool-call syntax (tool_calls.h names); "": from the chat template
};

class HttpServer {
 public:
  HttpServer(const TextModel& text, Scheduler& scheduler, ServerOptions opts);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. tq::Error when the address is unavailable.
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
};

}  // namespace tq::server
