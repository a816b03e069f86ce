#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>

#include "core/error.h"
#include "core/sysinfo.h"
#include "server/api_error.h"
#include "server/api_request.h"
#include "server/elastic_task_queue.h"
#include "server/generation.h"
#include "server/generation_plan.h"
#include "server/listen_socket.h"
#include "server/openai_format.h"
#include "server/request_log.h"
#include "server/web/chat_page.h"

namespace tq::server {
namespace {

using nlohmann::json;

void SendJson(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(Dump(j), "application/json");
}

// Runs a handler body, turning every exception into an OpenAI-shaped error response.
template <typename F>
void Guard(httplib::Response& res, F&& body) {
  try {
    body();
  } catch (const ApiError& e) {
    if (e.status() == 503) res.set_header("Retry-After", "1");
    SendJson(res, e.status(), e.ToJson());
  } catch (const tq::Error& e) {
    // Tokenizer / chat-template errors caused by the request's content.
    SendJson(res, 400, ErrorJson(e.what(), "invalid_request_error"));
  } catch (const std::exception& e) {
    SendJson(res, 500, ErrorJson(std::string("internal error: ") + e.what(), "server_error"));
  }
}

uint64_t RandomSeed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(mu);
  return rng();
}

// Metric label for a path: known routes by name, anything else "other" (bounded cardinality).
std::string EndpointLabel(const std::string& path) {
  static const char* known[] = {
      "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize",
      "/detokenize"};
  for (const char* k : known) {
    if (path == k) return k;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
  if (path == "/chat/completions") return "/v1/chat/completions";
  if (path == "/completions") return "/v1/completions";
  return "other";
}

// Constant-time comparison for the API key.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i % (b.size() + 1)]);
  return diff == 0;
}

// The state of one streaming response, shared by the content provider calls.
struct StreamState {
  std::shared_ptr<Generation> gen;
  ResponseMeta meta;
  bool chat = true;
  bool include_usage = false;
  bool logprobs = false;
  std::vector<std::string> echo;     // completions with echo: the prompt text per choice
  std::vector<size_t> offset;        // completions: text bytes sent per choice (text_offset)
  std::vector<bool> started, ended;  // per choice: first chunk / finish chunk sent
  std::vector<size_t> calls;         // chat: tool calls sent per choice
  std::vector<ChoiceOutput> buf, totals;
  bool done = false;

  // One round: wait briefly for output, write the chunks it makes. False: stop (client gone).
  bool Pump(httplib::DataSink& sink) {
    if (done) {
      sink.done();
      return true;
    }
    const bool all = gen->Take(buf, std::chrono::milliseconds(200));
    std::string out;
    for (size_t i = 0; i < buf.size(); ++i) {
      const ChoiceOutput& c = buf[i];
      if (!started[i]) {
        started[i] = true;
        if (chat) {
          out += SseData(ChatChunkJson(meta, i, true, "", nullptr, nullptr, include_usage));
        } else if (!echo[i].empty()) {
          out += SseData(CompletionChunkJson(meta, i, echo[i], nullptr, 0, nullptr, include_usage));
          offset[i] += echo[i].size();
        }
      }
      if (chat && !c.tool_calls.empty()) {
        out += SseData(ChatChunkJson(meta, i, false, "", nullptr, nullptr, include_usage,
                                     ToolCallDeltasJson(c.tool_calls, calls[i])));
        calls[i] += c.tool_calls.size();
      }
      if (!c.text.empty() || !c.logprobs.empty()) {
        const auto* lp = logprobs ? &c.logprobs : nullptr;
        out += SseData(
            chat ? ChatChunkJson(meta, i, false, c.text, lp, nullptr, include_usage)
                 : CompletionChunkJson(meta, i, c.text, lp, offset[i], nullptr, include_usage));
        offset[i] += c.text.size();
      }
      if (c.finished && !ended[i]) {
        ended[i] = true;
        totals[i].stats = c.stats;
        RequestLogAddTokens(c.stats.prompt_tokens, c.stats.completion_tokens);
        if (c.reason == FinishReason::kError || c.reason == FinishReason::kCancelled) {
          const std::string msg =
              c.reason == FinishReason::kError ? c.error : "the server is shutting down";
          out += SseData(ErrorJson(msg, "server_error"));
        } else {
          const char* fr =
              chat ? ChatFinishReason(c.reason, calls[i] > 0) : OpenAiFinishReason(c.reason);
          out += SseData(
              chat ? ChatChunkJson(meta, i, false, "", nullptr, fr, include_usage)
                   : CompletionChunkJson(meta, i, "", nullptr, offset[i], fr, include_usage));
        }
      }
    }
    if (all) {
      if (include_usage) out += SseData(UsageChunkJson(meta, chat, totals));
      out += kSseDone;
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      gen->Cancel();
      return false;
    }
    if (all) {
      done = true;
      sink.done();
    }
    return true;
  }
};

}  // namespace

HttpServer::HttpServer(const TextModel& text, Scheduler& scheduler, ServerOptions opts)
    : text_(text),
      scheduler_(scheduler),
      opts_(std::move(opts)),
      started_(int64_t(std::time(nullptr))),
      http_(std::make_unique<httplib::Server>()) {
  Route();
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::Bind() {
  int port = opts_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(opts_.host);
  } else if (!http_->bind_to_port(opts_.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    std::string why = BindFailureReason(opts_.host, opts_.port);
    if (why.empty()) why = "the address is not available";
    Fail("serve", "cannot listen on {}:{}: {}", opts_.host, opts_.port, why);
  }
  return port;
}

void HttpServer::Serve() { http_->listen_after_bind(); }

void HttpServer::Stop() {
  if (http_) http_->stop();
}

bool HttpServer::Authorized(const httplib::Request& req) const {
  if (opts_.api_key.empty()) return true;
  std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.rfind(bearer, 0) == 0) return SameSecret(auth.substr(bearer.size()), opts_.api_key);
  if (req.has_header("x-api-key"))
    return SameSecret(req.get_header_value("x-api-key"), opts_.api_key);
  return false;
}

void HttpServer::CheckModel(const std::string& model) const {
  if (!model.empty() && model != opts_.model_id) {
    throw ApiError(
        404, "invalid_request_error",
        "The model '" + model + "' does not exist; this server serves '" + opts_.model_id + "'",
        "model", "model_not_found");
  }
}

void HttpServer::Route() {
  const SchedulerOptions& so = scheduler_.options();
  // Up to every running and queued request, plus kIdleConnections more: a connection holds its
  // thread while it sends its request, so slow or idle clients (slowloris, keep-alives) must not
  // take every thread (docs/RELIABILITY.md measures it). The pool starts threads only when all
  // are busy and lets the extra ones exit after 10 s idle, so a long-running server's memory
  // follows its peak concurrency, not every thread that ever served a request.
  const int threads =
      opts_.http_threads > 0 ? opts_.http_threads : so.parallel + so.max_queue + kIdleConnections;
  ElasticTaskQueueOptions pool;
  pool.max_threads = size_t(threads);
  pool.min_threads = std::min<size_t>(size_t(so.parallel) + 4, pool.max_threads);
  http_->new_task_queue = [pool] { return new ElasticTaskQueue(pool); };
  http_->set_payload_max_length(opts_.max_body_bytes);
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  http_->set_keep_alive_max_count(1000);
  http_->set_keep_alive_timeout(5);
  http_->set_socket_options(ListenSocketOptions);  // no SO_REUSEPORT (listen_socket.h)
  if (!opts_.cors_origin.empty()) {                // CORS only when asked for (--cors ORIGIN)
    http_->set_default_headers(
        {{"Access-Control-Allow-Origin", opts_.cors_origin},
         {"Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key"},
         {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
         {"Vary", "Origin"}});
  }
  if (!ParseLogFormat(opts_.log_format, &log_format_)) {
    Fail("serve", "log format '{}' is not one of none, text, json", opts_.log_format);
  }

  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    RequestLogBegin();
    if (req.method == "OPTIONS" && !opts_.cors_origin.empty()) {  // CORS preflight
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    // The chat page itself holds no data: it loads without the key and asks for it.
    if (req.path != "/health" && req.path != "/" && !Authorized(req)) {
      const bool missing = !req.has_header("Authorization") && !req.has_header("x-api-key");
      SendJson(res, 401,
               ErrorJson(missing ? "Missing API key: send 'Authorization: Bearer <key>'"
                                 : "Incorrect API key provided",
                         "invalid_request_error", "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                       httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    json err;
    switch (res.status) {
      case 404:
        err = ErrorJson("Unknown route: " + req.method + " " + req.path, "invalid_request_error",
                        "", "not_found");
        break;
      case 413:
        err = ErrorJson(
            fmt::format("Request body is larger than the limit of {} bytes", opts_.max_body_bytes),
            "invalid_request_error", "", "request_too_large");
        break;
      default:
        err = ErrorJson(fmt::format("HTTP error {}", res.status),
                        res.status >= 500 ? "server_error" : "invalid_request_error");
    }
    res.set_content(Dump(err), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendJson(res, 500, ErrorJson("internal error: " + what, "server_error"));
      });
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    counters_.Count(EndpointLabel(req.path), res.status);
    RequestLogLine line{.method = req.method, .path = req.path, .status = res.status};
    RequestLogFinish(&line);
    if (log_format_ != LogFormat::kNone) {
      const std::string text = FormatRequestLog(line, log_format_) + "\n";
      std::fwrite(text.data(), 1, text.size(), stderr);  // one write: lines never interleave
    }
  });

  using R = const httplib::Request&;
  using W = httplib::Response&;
  http_->Get("/health", [](R, W res) { SendJson(res, 200, {{"status", "ok"}}); });
  http_->Get("/", [](R, W res) {
    const std::string_view page = ChatPageHtml();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  http_->Get("/v1/models", [this](R req, W res) { HandleModels(req, res); });
  http_->Get(R"(/v1/models/(.+))", [this](R req, W res) { HandleModels(req, res); });
  http_->Get("/metrics", [this](R req, W res) { HandleMetrics(req, res); });
  // POST routes read the body themselves (see http_server.h).
  auto post = [this](const char* path, std::function<void(const std::string&, W)> fn) {
    http_->Post(path, [this, fn](R, W res, const httplib::ContentReader& reader) {
      std::string body;
      bool too_large = false;
      const bool ok = reader([&](const char* data, size_t n) {
        if (body.size() + n > opts_.max_body_bytes) {
          too_large = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
      if (too_large || res.status == 413) {
        SendJson(res, 413,
                 ErrorJson(fmt::format("Request body is larger than the limit of {} bytes",
                                       opts_.max_body_bytes),
                           "invalid_request_error", "", "request_too_large"));
      } else if (!ok) {
        SendJson(res, 400, ErrorJson("Could not read the request body", "invalid_request_error"));
      } else {
        fn(body, res);
      }
    });
  };
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) {
    post(p, [this](const std::string& body, W res) { HandleGeneration(body, res, true); });
  }
  for (const char* p : {"/v1/completions", "/completions"}) {
    post(p, [this](const std::string& body, W res) { HandleGeneration(body, res, false); });
  }
  post("/tokenize", [this](const std::string& body, W res) { HandleTokenize(body, res); });
  post("/detokenize", [this](const std::string& body, W res) { HandleDetokenize(body, res); });
}

void HttpServer::HandleModels(const httplib::Request& req, httplib::Response& res) {
  Guard(res, [&] {
    const json model = {{"id", opts_.model_id},
                        {"object", "model"},
                        {"created", started_},
                        {"owned_by", "turboquant"},
                        {"max_model_len", opts_.context}};
    if (req.matches.size() > 1) {
      if (req.matches[1].str() != opts_.model_id) CheckModel(req.matches[1].str());
      SendJson(res, 200, model);
      return;
    }
    SendJson(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });
}

void HttpServer::HandleMetrics(const httplib::Request&, httplib::Response& res) {
  const double uptime = double(int64_t(std::time(nullptr)) - started_);
  std::string text = RenderMetrics(scheduler_.Stats(), counters_, opts_.model_id, opts_.kv_cache,
                                   CurrentRssBytes(), uptime, scheduler_.DeviceMemory());
  if (opts_.extra_metrics) text += opts_.extra_metrics();
  res.set_content(text, "text/plain; version=0.0.4");
}

void HttpServer::HandleTokenize(const std::string& body, httplib::Response& res) {
  Guard(res, [&] {
    const TokenizeRequest r = ParseTokenizeRequest(ParseJsonBody(body));
    const std::string text =
        r.has_messages ? text_.RenderChat(r.messages, nullptr, true, nullptr) : r.text;
    const std::vector<int32_t> ids = text_.Encode(text, r.add_special);
    json tokens = json::array();
    for (int32_t id : ids) {
      if (r.with_pieces) {
        const int32_t one[1] = {id};
        tokens.push_back({{"id", id}, {"piece", text_.Decode(one, false)}});
      } else {
        tokens.push_back(id);
      }
    }
    SendJson(res, 200,
             {{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", opts_.context}});
  });
}

void HttpServer::HandleDetokenize(const std::string& body, httplib::Response& res) {
  Guard(res, [&] {
    const std::vector<int32_t> ids = ParseDetokenizeRequest(ParseJsonBody(body));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= text_.vocab_size()) {
        throw BadRequest(fmt::format("tokens[{}]", i),
                         fmt::format("token id {} is outside the vocabulary [0, {})", ids[i],
                                     text_.vocab_size()));
      }
    }
    const std::string text = text_.Decode(ids, false);
    SendJson(res, 200, {{"content", text}, {"prompt", text}});
  });
}

void HttpServer::HandleGeneration(const std::string& raw, httplib::Response& res, bool chat) {
  Guard(res, [&] {
    const auto body = ParseJsonBody(raw);
    const GenerationRequest r = chat ? ParseChatRequest(body) : ParseCompletionRequest(body);
    CheckModel(r.model);
    std::optional<ToolFamily> family;
    if (!opts_.tool_parser.empty()) family = ParseToolFamily(opts_.tool_parser);
    const GenerationPlan plan = PlanGeneration(r, text_, family);

    // Prompts as tokens. A chat template writes its own BOS, so no special tokens are added.
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> echo;
    if (chat) {
      const ToolFamily tf = family ? *family : DetectToolFamily(text_.ChatTemplateSource());
      const std::string text = text_.RenderChat(PrepareToolMessages(tf, r.messages), r.tools,
                                                r.add_generation_prompt, r.template_kwargs);
      prompts.push_back(text_.Encode(text, /*add_special=*/false));
    } else {
      for (size_t i = 0; i < r.prompts.size(); ++i) {
        const Prompt& p = r.prompts[i];
        if (p.is_tokens) {
          for (size_t k = 0; k < p.tokens.size(); ++k) {
            if (p.tokens[k] >= text_.vocab_size()) {
              throw BadRequest("prompt", fmt::format("prompt token id {} is outside the "
                                                     "vocabulary [0, {})",
                                                     p.tokens[k], text_.vocab_size()));
            }
          }
          prompts.push_back(p.tokens);
        } else {
          prompts.push_back(text_.Encode(p.text, /*add_special=*/true));
        }
        echo.push_back(!r.echo       ? std::string()
                       : p.is_tokens ? text_.Decode(p.tokens, false)
                                     : p.text);
      }
    }
    const char* field = chat ? "messages" : "prompt";
    for (const auto& p : prompts) {
      if (p.empty()) throw BadRequest(field, "the prompt is empty (it has no tokens)");
      if (int64_t(p.size()) >= opts_.context) {
        throw ApiError(400, "invalid_request_error",
                       fmt::format("This model's maximum context length is {} tokens, but the "
                                   "prompt has {} tokens (at least one more is needed to "
                                   "generate). Shorten the {}.",
                                   opts_.context, p.size(), field),
                       field, "context_length_exceeded");
      }
      // max_tokens beyond the room left is refused (as OpenAI and vLLM do), not clamped.
      if (r.max_tokens && int64_t(p.size()) + *r.max_tokens > opts_.context) {
        throw ApiError(
            400, "invalid_request_error",
            fmt::format("This model's maximum context length is {} tokens; the prompt "
                        "has {} tokens and max_tokens is {} ({} in all). Lower "
                        "max_tokens to at most {} or shorten the {}.",
                        opts_.context, p.size(), *r.max_tokens, int64_t(p.size()) + *r.max_tokens,
                        opts_.context - int64_t(p.size()), field),
            "max_tokens", "context_length_exceeded");
      }
    }

    // Choices prompt-major: prompt i's j-th choice is choice i * n + j. With a seed, choice j
    // samples with seed + j (so n > 1 gives different choices, reproducibly).
    const size_t n = size_t(r.n);
    auto gen = std::make_shared<Generation>(text_, prompts.size() * n);
    const SamplingParams defaults = text_.DefaultSampling();
    Generation::SinkOptions sink_opts;
    sink_opts.stop = r.stop;
    sink_opts.logprobs = r.logprobs;
    sink_opts.tools = plan.tools;
    sink_opts.parallel_tool_calls = r.parallel_tool_calls;
    std::vector<SequenceRequest> seqs;
    std::vector<std::string> echo_n;
    for (size_t i = 0; i < prompts.size(); ++i) {
      for (size_t j = 0; j < n; ++j) {
        SequenceRequest s;
        s.prompt = prompts[i];
        s.max_tokens = r.max_tokens.value_or(0);
        SamplingRequest sr = r.sampling;
        if (sr.seed) sr.seed = *sr.seed + j;
        s.sampler = MakeSampler(plan, ResolveSampling(sr, defaults, RandomSeed()), text_, s.prompt);
        // A grammar ends the output with an end token: those stay on even with ignore_eos.
        if (!r.ignore_eos || plan.grammar) s.eos_tokens = text_.EosTokens();
        s.top_logprobs = r.logprobs ? r.top_logprobs : -1;
        s.sink = gen->MakeSink(i * n + j, s.prompt, sink_opts);
        seqs.push_back(std::move(s));
        if (!echo.empty()) echo_n.push_back(echo[i]);
      }
    }
    echo = std::move(echo_n);
    if (!scheduler_.Submit(std::move(seqs))) {
      throw ApiError(503, "server_error",
                     "The server is busy (the request queue is full); retry shortly", "",
                     "server_overloaded");
    }

    ResponseMeta meta{NewResponseId(chat ? "chatcmpl-" : "cmpl-"), int64_t(std::time(nullptr)),
                      opts_.model_id};
    if (!r.stream) {
      std::vector<ChoiceOutput> outs = gen->WaitAll();
      for (const auto& o : outs) {
        RequestLogAddTokens(o.stats.prompt_tokens, o.stats.completion_tokens);
        if (o.reason == FinishReason::kCancelled) {
          throw ApiError(503, "server_error", "The server is shutting down", "", "shutting_down");
        }
        if (o.reason == FinishReason::kError) {
          throw ApiError(500, "server_error", "Generation failed: " + o.error);
        }
      }
      SendJson(res, 200,
               chat ? ChatCompletionJson(meta, outs, r.logprobs)
                    : CompletionJson(meta, outs, echo, r.logprobs));
      return;
    }
    auto st = std::make_shared<StreamState>();
    const size_t choices = gen->num_choices();
    st->gen = gen;
    st->meta = std::move(meta);
    st->chat = chat;
    st->include_usage = r.include_usage;
    st->logprobs = r.logprobs;
    st->echo = echo.empty() ? std::vector<std::string>(choices) : echo;
    st->offset.assign(choices, 0);
    st->started.assign(choices, false);
    st->ended.assign(choices, false);
    st->calls.assign(choices, 0);
    st->totals.resize(choices);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [st](size_t, httplib::DataSink& sink) { return st->Pump(sink); },
        [st](bool) { st->gen->Cancel(); });  // finished or not, nobody reads any more
  });
}

}  // namespace tq::server
