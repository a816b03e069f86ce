// turboquant bench --model DIR [--prompt-tokens 512] [--gen-tokens 128] [--context C]
//   [--threads N] [--kv-dtype f16|bf16|f32] [--json]
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runtime_flags.h"
#include "cli/verb.h"
#include "core/sysinfo.h"
#include "model/model.h"
#include "runtime/bench.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app("Prefill and decode speed with random tokens, and memory", argv[0]);
  std::string model_dir;
  BenchOptions o;
  RuntimeFlags rt;
  bool json = false;
  app.add_option("--model", model_dir, "model directory")->required();
  app.add_option("--prompt-tokens", o.prompt_tokens, "prefill length")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--gen-tokens", o.gen_tokens, "decoded tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--context", o.context, "decode after a context of C tokens (default: the prompt)")
      ->check(CLI::NonNegativeNumber);
  std::string fill = "auto";
  app.add_option("--context-fill", fill,
                 "how the --context is made: prefill (real tokens), synthetic (random K/V of "
                 "realistic magnitude) or auto (synthetic above 2048 tokens)")
      ->check(CLI::IsMember({"auto", "prefill", "synthetic"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random token ids")->capture_default_str();
  AddRuntimeFlags(app, &rt);
  app.add_flag("--json", json, "print one JSON object on stdout");
  return RunApp(app, argc, argv, [&] {
    ApplyThreads(rt);
    ApplyKvOptions(rt, &o.kv);
    o.fill = fill == "prefill"     ? BenchOptions::Fill::kPrefill
             : fill == "synthetic" ? BenchOptions::Fill::kSynthetic
                                   : BenchOptions::Fill::kAuto;
    Timer load;
    auto model = Model::Load(model_dir, LoadOptions(rt));
    const double load_s = load.Seconds();
    const BenchResult r = RunBench(*model, o);
    // Bytes one decode step reads: the weights it uses and the whole KV cache.
    const double bytes_per_token = double(r.weight_bytes_per_token) + double(r.kv_bytes);
    if (json) {
      nlohmann::json j = {{"prefill_tok_s", r.prefill_tok_s},
                          {"decode_tok_s", r.decode_tok_s},
                          {"peak_rss_bytes", r.peak_rss_bytes},
                          {"model_bytes", r.model_bytes},
                          {"kv_bytes_per_token", r.kv_bytes_per_token},
                          {"prompt_tokens", r.prompt_tokens},
                          {"gen_tokens", r.gen_tokens},
                          {"decode_context", r.decode_context},
                          {"context_fill", r.context_fill},
                          {"kv_dtype", rt.kv_dtype},
                          {"device", std::string(model->backend().name())},
                          {"backend", model->backend().Describe()},
                          {"kv_cache", DescribeKvCache(o.kv)},
                          {"kv_bytes", r.kv_bytes},
                          {"threads", r.threads},
                          {"load_seconds", load_s},
                          {"bytes_read_per_decode_token", bytes_per_token},
                          {"weight_bytes_per_decode_token", r.weight_bytes_per_token},
                          {"logits_finite", r.logits_finite}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("model        %s (%.1f MB weights, loaded in %.1f s)\n", model_dir.c_str(),
                  double(r.model_bytes) / 1e6, load_s);
      std::printf("device       %s\n", model->backend().Describe().c_str());
      std::printf("threads      %d   kv-dtype %s\n", r.threads, rt.kv_dtype.c_str());
      std::printf("prefill      %lld tokens: %.1f tok/s (%.2f s)\n",
                  static_cast<long long>(r.prompt_tokens), r.prefill_tok_s, r.prefill_seconds);
      std::printf("decode       %lld tokens after %lld of context (%s): %.2f tok/s (%.2f s)\n",
                  static_cast<long long>(r.gen_tokens), static_cast<long long>(r.decode_context),
                  r.context_fill == "prefill"     ? "real prefill"
                  : r.context_fill == "synthetic" ? "synthetic K/V"
                                                  : "the prompt",
                  r.decode_tok_s, r.decode_seconds);
      std::printf("bytes/token  %.1f MB read per decoded token (weights used + KV): %.2f GB/s\n",
                  bytes_per_token / 1e6, bytes_per_token * r.decode_tok_s / 1e9);
      std::printf("kv cache     %s: %lld bytes/token, %lld bytes at the end\n",
                  DescribeKvCache(o.kv).c_str(), static_cast<long long>(r.kv_bytes_per_token),
                  static_cast<long long>(r.kv_bytes));
      std::printf("peak rss     %.1f MB\n", double(r.peak_rss_bytes) / 1e6);
      if (!r.logits_finite) std::printf("WARNING      non-finite logits\n");
    }
    return r.logits_finite ? kExitOk : kExitFailure;
  });
}

VerbRegistrar reg("bench", "prefill/decode tokens per second and memory", &Run);

}  // namespace
}  // namespace tq::cli
