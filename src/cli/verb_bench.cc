// turboquant bench -m DIR [--prompt-tokens 512] [-n 128] [-c C]
//   [-t N] [--kv-dtype f16|bf16|f32] [--json]
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runtime_flags.h"
#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/sysinfo.h"
#include "model/model.h"
#include "runtime/bench.h"
#include "runtime/plan/plan_report.h"

namespace tq::cli {
namespace {

nlohmann::json ExpertStatsJson(const ExpertCacheStats& s, int64_t tokens) {
  const double per = 1.0 / double(std::max<int64_t>(1, tokens));
  return {
      {"slots", s.slots},
      {"slot_bytes", s.slot_bytes},
      {"experts", s.experts},
      {"lookups", s.lookups},
      {"hits", s.hits},
      {"misses", s.misses},
      {"hit_rate", s.hit_rate()},
      {"prefetches", s.prefetches},
      {"prefetch_hits", s.prefetch_hits},
      {"predicted", s.predicted},
      {"predicted_used", s.predicted_used},
      {"prediction_precision", s.predicted ? double(s.predicted_used) / double(s.predicted) : 0.0},
      {"bytes_read", s.bytes_read},
      {"bytes_read_per_token", double(s.bytes_read) * per},
      {"stall_seconds", s.stall_seconds},
      {"host_copy_bytes", s.host_copy_bytes},
      {"stall_seconds_per_token", s.stall_seconds * per}};
}

int Run(int argc, char** argv) {
  CLI::App app("Prefill and decode speed with random tokens, and memory", argv[0]);
  std::string model_dir;
  BenchOptions o;
  RuntimeFlags rt;
  bool json = false;
  AddModelFlag(app, &model_dir);
  app.add_option("--prompt-tokens", o.prompt_tokens, "prefill length")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--gen-tokens", o.gen_tokens, "decoded tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  AddCtxFlag(app, &o.context, "decode after a context of C tokens (default: the prompt)");
  std::string fill = "auto";
  app.add_option("--context-fill", fill,
                 "how the --context is made: prefill (real tokens), synthetic (random K/V of "
                 "realistic magnitude) or auto (synthetic above 2048 tokens)")
      ->check(CLI::IsMember({"auto", "prefill", "synthetic"}))
      ->capture_default_str();
  app.add_option("-s,--seed", o.seed, "seed of the random token ids")->capture_default_str();
  app.add_option("--warmup", o.warmup,
                 "untimed runs of the prompt and one decode step before the timed ones (the "
                 "first products of a process set up libraries and fault in the weights)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(100)));
  AddRuntimeFlags(app, &rt);
  app.add_flag("--json", json, "print one JSON object on stdout");
  SetExamples(app, {"turboquant bench -m out/q4",
                    "turboquant bench -m out/q4 --prompt-tokens 512 -n 128 -t 8 --json",
                    "turboquant bench -m out/q4 -c 32768 --kv-bits 4"});
  return RunApp(app, argc, argv, [&] {
    model_dir = ResolveModelDir(model_dir);
    ApplyThreads(rt);
    ApplyKvOptions(rt, &o.kv);
    o.fill = fill == "prefill"     ? BenchOptions::Fill::kPrefill
             : fill == "synthetic" ? BenchOptions::Fill::kSynthetic
                                   : BenchOptions::Fill::kAuto;
    Timer load;
    // The cache holds the context (or the prompt) and the decoded tokens.
    const int64_t held = (o.context > 0 ? o.context : o.prompt_tokens) + o.gen_tokens;
    auto model = Model::Load(model_dir, LoadOptions(rt, model_dir, held));
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
                          {"warmup", r.warmup},
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
      if (r.device_used_bytes >= 0) {
        j["device_peak_allocated_bytes"] = r.device_peak_allocated_bytes;
        j["device_used_bytes"] = r.device_used_bytes;
        j["device_memory_limit"] = model->backend().MemoryLimit();
      }
      if (r.expert_streaming) {
        j["expert_cache"] = {{"prefill", ExpertStatsJson(r.prefill_experts, r.prompt_tokens)},
                             {"decode", ExpertStatsJson(r.decode_experts, r.gen_tokens)},
                             {"policy", rt.expert_cache_policy},
                             {"readers", rt.expert_readers},
                             {"resident_weight_bytes", r.resident_weight_bytes}};
      }
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("model        %s (%s weights, loaded in %.1f s)\n", model_dir.c_str(),
                  HumanBytes(int64_t(r.model_bytes)).c_str(), load_s);
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
      std::printf("bytes/token  %s read per decoded token (weights used + KV): %.2f GiB/s\n",
                  HumanBytes(int64_t(bytes_per_token)).c_str(),
                  bytes_per_token * r.decode_tok_s / double(1 << 30));
      std::printf("kv cache     %s: %lld bytes/token, %lld bytes at the end\n",
                  DescribeKvCache(o.kv).c_str(), static_cast<long long>(r.kv_bytes_per_token),
                  static_cast<long long>(r.kv_bytes));
      std::printf("peak rss     %s\n", HumanBytes(int64_t(r.peak_rss_bytes)).c_str());
      if (r.device_used_bytes >= 0)
        std::printf("device mem   %s peak held by the engine, %s of the card in use at the end\n",
                    HumanBytes(r.device_peak_allocated_bytes).c_str(),
                    HumanBytes(r.device_used_bytes).c_str());
      if (r.expert_streaming) {
        const ExpertCacheStats& d = r.decode_experts;
        std::printf(
            "experts      %lld slots of %s (%s; %s resident besides): decode hit rate "
            "%.1f%%, %s read/token, stall %.1f ms/token, prefetch predicted %.0f%%\n",
            static_cast<long long>(d.slots), HumanBytes(d.slot_bytes).c_str(),
            HumanBytes(d.slots * d.slot_bytes).c_str(), HumanBytes(r.resident_weight_bytes).c_str(),
            100 * d.hit_rate(),
            HumanBytes(d.bytes_read / std::max<int64_t>(1, r.gen_tokens)).c_str(),
            1e3 * d.stall_seconds / double(std::max<int64_t>(1, r.gen_tokens)),
            d.predicted ? 100.0 * double(d.predicted_used) / double(d.predicted) : 0.0);
      }
      if (!r.logits_finite) std::printf("WARNING      non-finite logits\n");
    }
    return r.logits_finite ? kExitOk : kExitFailure;
  });
}

VerbRegistrar reg("bench", "prefill/decode tokens per second and memory", &Run);

}  // namespace
}  // namespace tq::cli
