// turboquant serve: the OpenAI-compatible HTTP server (src/server/).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/cli_kv_flags.h"
#include "cli/cli_runtime_flags.h"
#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/model_engine.h"
#include "runtime/scheduler.h"
#include "server/http_server.h"
#include "server/listen_socket.h"
#include "server/model_text_model.h"

namespace {

int Run(int argc, char** argv) {
  CLI::App app{
      "Serve a model over an OpenAI-compatible HTTP API (/v1/chat/completions, "
      "/v1/completions, /v1/models, /tokenize, /detokenize, /health, /metrics).\n"
      "KV memory: (--parallel + --keep-caches) caches of --ctx tokens; --kv-bits B stores them "
      "as TurboQuant codes (4 bits: ~3.8x smaller than f16). The startup line and /metrics "
      "(turboquant_kv_cache_info, _bytes_per_token, _bytes) give the cache's size.",
      argv[0]};  // the name errors are prefixed with ("turboquant serve: ...")
  std::string model_dir, host = "127.0.0.1", api_key, model_id, cors, log_format = "text";
  int port = 8080, parallel = 4, max_queue = 64, keep = 4, http_threads = 0;
  tq::cli::RuntimeFlags rt;  // --threads, --kv-dtype, --kv-bits ... (shared with generate)
  int64_t ctx = 0, prefill_chunk = 256, max_body_mib = 8;
  tq::cli::AddModelFlag(
      app, &model_dir,
      "Model directory (Hugging Face or TurboQuant layout) or hub id ORG/NAME[@REV]");
  tq::cli::ModelFetchFlags fetch;
  tq::cli::AddModelFetchFlags(app, &fetch);
  app.add_option("--host", host,
                 "Address to listen on (127.0.0.1: this machine only; $TURBOQUANT_HOST)")
      ->envname("TURBOQUANT_HOST")
      ->capture_default_str();
  app.add_option("--port", port, "TCP port (0: any free port; $TURBOQUANT_PORT)")
      ->envname("TURBOQUANT_PORT")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--api-key", api_key,
                 "Require 'Authorization: Bearer KEY' (default: $TURBOQUANT_API_KEY, else none)")
      ->envname("TURBOQUANT_API_KEY");
  app.add_option("--cors", cors,
                 "Allow browsers on this origin (e.g. http://localhost:3000, or *) to call the "
                 "API (default: no CORS headers)");
  app.add_option("--log-format", log_format,
                 "One line per request on stderr: text, json or none ($TURBOQUANT_LOG)")
      ->envname("TURBOQUANT_LOG")
      ->check(CLI::IsMember({"text", "json", "none"}))
      ->capture_default_str();
  app.add_option("--model-id", model_id, "Model name in the API (default: the directory name)");
  app.add_option("--parallel", parallel, "Sequences decoded together in one batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  tq::cli::AddCtxFlag(app, &ctx,
                      "Tokens per sequence, prompt + completion (default: the model's maximum, "
                      "at most 8192)");
  app.add_option("--max-queue", max_queue, "Requests waiting beyond --parallel before 503")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--http-threads", http_threads,
                 "Connections served at once (default: --parallel + --max-queue + 512; a slow "
                 "client holds one while its request arrives)")
      ->check(CLI::Range(0, 65536));
  tq::cli::AddRuntimeFlags(app, &rt);
  app.add_option("--keep-caches", keep,
                 "Finished sequences' KV caches kept for prompt-prefix reuse")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--prefill-chunk", prefill_chunk,
                 "Prompt tokens prefilled per scheduler step (between decode steps)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  std::string tool_parser;
  app.add_option("--tool-parser", tool_parser,
                 "Tool-call syntax parsed out of replies: hermes (also Qwen), llama3, mistral, "
                 "harmony (gpt-oss), deepseek, json, none (default: read from the chat template)")
      ->check(CLI::IsMember({"hermes", "qwen", "llama3", "mistral", "harmony", "gpt-oss",
                             "deepseek", "json", "none"}));
  app.add_option("--max-body-mib", max_body_mib, "Largest request body (MiB) before 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1024)));

  tq::cli::SetExamples(
      app, {"turboquant serve -m models/tq-llama-21m",
            "turboquant serve -m out/q4 --host 0.0.0.0 --port 8080 --api-key \"$KEY\" --kv-bits 4",
            "curl -s localhost:8080/v1/chat/completions -H 'Content-Type: application/json' "
            "-d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'"});
  return tq::cli::RunApp(app, argc, argv, [&]() -> int {
    // Signals are taken by one thread with sigwait: block them before any thread starts.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    tq::KvCacheOptions kv;  // usage errors before the model loads
    tq::cli::ApplyKvOptions(rt, &kv);
    tq::cli::ApplyThreads(rt);

    // A taken port fails now, not after the model loads (Bind checks again, race-free).
    if (port != 0) {
      const std::string why = tq::server::BindFailureReason(host, port);
      if (!why.empty()) tq::Fail("serve", "cannot listen on {}:{}: {}", host, port, why);
    }
    const std::string model_arg = model_dir;
    model_dir = tq::cli::ResolveModelDir(model_dir, &fetch);
    if (model_id.empty() && model_dir != model_arg) model_id = model_arg;  // a hub id names it
    // The expert-cache default plans the KV of every cache (--parallel + --keep-caches of --ctx
    // tokens; with no --ctx, one cache of the default context).
    auto model = tq::Model::Load(
        model_dir, tq::cli::LoadOptions(rt, model_dir, ctx > 0 ? ctx * (parallel + keep) : 0));
    const tq::ModelConfig& cfg = model->config();
    if (ctx == 0) ctx = tq::cli::DefaultContext(cfg);
    auto text = tq::server::ModelTextModel::Load(model_dir, cfg);
    kv.max_tokens = ctx;
    // Sliding-window layers keep window + max_append positions: room for a whole prompt chunk.
    kv.max_append = std::max(kv.max_append, prefill_chunk);
    tq::ModelEngine engine(*model, parallel + keep, kv);
    tq::Scheduler scheduler(
        engine, {.parallel = parallel, .max_queue = max_queue, .prefill_chunk = prefill_chunk});

    tq::server::ServerOptions so;
    so.host = host;
    so.port = port;
    so.api_key = api_key;
    so.model_id = model_id.empty()
                      ? std::filesystem::path(model_dir).lexically_normal().filename().string()
                      : model_id;
    if (so.model_id.empty())
      so.model_id = std::filesystem::absolute(model_dir).parent_path().filename().string();
    so.context = ctx;
    so.kv_cache = tq::cli::DescribeKvCache(kv);
    so.max_body_bytes = size_t(max_body_mib) << 20;
    so.cors_origin = cors;
    so.http_threads = http_threads;
    so.log_format = log_format;
    so.tool_parser = tool_parser;
    if (const tq::ExpertCache* ec = model->expert_cache())
      so.extra_metrics = [ec] { return tq::server::RenderExpertCacheMetrics(ec->stats()); };
    tq::server::HttpServer server(*text, scheduler, so);
    const int bound = server.Bind();
    std::thread http([&] { server.Serve(); });
    // Every cache may fill to the context: the most KV memory this server can take (coded
    // size for a TurboQuant cache).
    const double kv_gib = double(engine.kv_bytes_per_token()) * double(ctx) *
                          double(parallel + keep) / double(1 << 30);
    if (host != "127.0.0.1" && host != "localhost" && host != "::1" && api_key.empty()) {
      std::fprintf(stderr,
                   "turboquant serve: warning: listening on %s without --api-key: anyone who "
                   "can reach this address can use the model\n",
                   host.c_str());
    }
    std::printf(
        "turboquant serve: model '%s' on %s (ctx %lld, parallel %d, kv %s, %lld bytes/token, up "
        "to %.2f GiB) listening on http://%s:%d\n",
        so.model_id.c_str(), model->backend().Describe().c_str(), (long long)ctx, parallel,
        so.kv_cache.c_str(), (long long)engine.kv_bytes_per_token(), kv_gib, host.c_str(), bound);
    std::fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "turboquant serve: signal %d, shutting down\n", sig);
    scheduler.Stop();  // finishes every request (cancelled) so HTTP threads return
    server.Stop();
    http.join();
    return tq::cli::kExitOk;
  });
}

tq::cli::VerbRegistrar reg("serve", "serve a model over an OpenAI-compatible HTTP API", &Run);

}  // namespace
