#include "runtime/bench.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/sysinfo.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/sampler.h"

namespace tq {
namespace {

bool AllFinite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

int64_t DecodeWeightBytesPerToken(const ModelConfig& c, int64_t weight_bytes) {
  const double h = double(c.hidden_size), v = double(c.vocab_size);
  const double q = double(c.num_heads * c.head_dim), kv = double(c.num_kv_heads * c.head_dim);
  double total = v * h * (c.tie_word_embeddings ? 1 : 2);  // parameters stored
  double skipped = c.tie_word_embeddings ? 0 : v * h;      // not read per token
  const double expert_ffn =
      double(c.model_type == "mixtral" ? c.intermediate_size : c.moe_intermediate_size);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    total += 2 * h * q + 2 * h * kv;
    if (c.is_moe() && c.LayerIsMoe(l)) {
      const double experts = 3 * h * expert_ffn * double(c.num_experts);
      total +=
          experts + h * double(c.num_experts) + 3 * h * double(c.shared_expert_intermediate_size);
      skipped += experts * (1.0 - double(c.num_experts_per_tok) / double(c.num_experts));
    } else {
      total += 3 * h * double(c.intermediate_size);
    }
  }
  if (total <= 0) return weight_bytes;
  return int64_t(double(weight_bytes) * (total - skipped) / total);
}

BenchResult RunBench(Model& model, const BenchOptions& opts) {
  TQ_CHECK(opts.prompt_tokens >= 1, "bench", "--prompt-tokens must be >= 1 (got {})",
           opts.prompt_tokens);
  TQ_CHECK(opts.gen_tokens >= 1, "bench", "--gen-tokens must be >= 1 (got {})", opts.gen_tokens);
  TQ_CHECK(opts.context >= 0, "bench", "--context must be >= 0 (got {})", opts.context);
  const int64_t vocab = model.vocab_size();
  const int64_t decode_from = opts.context > 0 ? opts.context : opts.prompt_tokens;
  KvCacheOptions kv = opts.kv;
  kv.max_tokens = std::max(opts.prompt_tokens, decode_from) + opts.gen_tokens;
  auto cache = model.NewCache(kv);

  std::mt19937_64 rng(opts.seed);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(size_t(std::max(opts.prompt_tokens, decode_from)));
  for (auto& t : ids) t = pick(rng);
  std::vector<float> logits(static_cast<size_t>(vocab));

  BenchResult r;
  r.prompt_tokens = opts.prompt_tokens;
  r.gen_tokens = opts.gen_tokens;
  r.threads = ThreadPool::Global().size();
  r.model_bytes = model.WeightBytes();
  r.weight_bytes_per_token = DecodeWeightBytesPerToken(model.config(), r.model_bytes);
  r.kv_bytes_per_token = cache->BytesPerToken();

  ExpertCache* experts = model.expert_cache();
  r.expert_streaming = experts != nullptr;
  r.resident_weight_bytes = model.ResidentWeightBytes();
  if (experts) experts->ResetStats();
  // Prefill: the prompt as one batch from an empty cache.
  Timer t;
  model.Forward(std::span<const int32_t>(ids.data(), size_t(opts.prompt_tokens)), *cache,
                logits.data());
  r.prefill_seconds = t.Seconds();
  r.prefill_tok_s = double(opts.prompt_tokens) / r.prefill_seconds;
  r.logits_finite = AllFinite(logits);

  if (opts.context > 0) {
    cache->Truncate(0);
    const bool synthetic = opts.fill == BenchOptions::Fill::kSynthetic ||
                           (opts.fill == BenchOptions::Fill::kAuto && opts.context > 2048);
    if (synthetic) {
      // Keys/values of realistic magnitude; the last token's logits come from one real step.
      cache->FillSynthetic(opts.context - 1, opts.seed);
      model.Forward(std::span<const int32_t>(ids.data(), 1), *cache, logits.data());
      r.context_fill = "synthetic";
    } else {
      // A context of real (random) tokens, filled in chunks; not timed.
      for (int64_t b = 0; b < opts.context; b += opts.prefill_chunk) {
        const int64_t n = std::min(opts.prefill_chunk, opts.context - b);
        model.Forward(std::span<const int32_t>(ids.data() + b, size_t(n)), *cache, logits.data());
      }
      r.context_fill = "prefill";
    }
  } else {
    r.context_fill = "prompt";
  }
  r.decode_context = cache->size();

  if (experts) {
    r.prefill_experts = experts->stats();
    experts->ResetStats();
  }
  t.Reset();
  for (int64_t i = 0; i < opts.gen_tokens; ++i) {
    const int32_t next = ArgMax(logits.data(), vocab);
    model.Forward(std::span<const int32_t>(&next, 1), *cache, logits.data());
  }
  r.decode_seconds = t.Seconds();
  r.decode_tok_s = double(opts.gen_tokens) / r.decode_seconds;
  if (experts) r.decode_experts = experts->stats();
  r.logits_finite = r.logits_finite && AllFinite(logits);
  r.kv_bytes = cache->MemoryBytes();  // sliding-window layers hold only their window
  r.peak_rss_bytes = PeakRssBytes();
  return r;
}

}  // namespace tq
