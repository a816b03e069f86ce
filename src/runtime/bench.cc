#include "runtime/bench.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/sysinfo.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "model/tensor_roles.h"
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
  // From the tensors the layer spec names (model/spec_tensors.cc): one decoded token reads every
  // weight but an untied input table (rows by id) and the experts its router does not pick.
  double total = 0, skipped = 0;
  const double unpicked =
      c.num_experts > 0 ? 1.0 - double(c.num_experts_per_tok) / double(c.num_experts) : 0.0;
  for (const ExpectedTensor& t : ExpectedTensors(c)) {
    if (t.role == TensorRole::kLmHead && c.tie_word_embeddings) continue;  // the table itself
    const double n = double(NumElements(t.shape));
    total += n;
    if (t.role == TensorRole::kEmbed && !c.tie_word_embeddings) skipped += n;
    if (IsExpert(t.role)) skipped += n * unpicked;
  }
  if (total <= 0) return weight_bytes;
  return int64_t(double(weight_bytes) * (total - skipped) / total);
}

BenchResult RunBench(Model& model, const BenchOptions& opts) {
  TQ_CHECK(opts.prompt_tokens >= 1, "bench", "--prompt-tokens must be >= 1 (got {})",
           opts.prompt_tokens);
  TQ_CHECK(opts.gen_tokens >= 1, "bench", "--gen-tokens must be >= 1 (got {})", opts.gen_tokens);
  TQ_CHECK(opts.context >= 0, "bench", "--context must be >= 0 (got {})", opts.context);
  TQ_CHECK(opts.warmup >= 0, "bench", "--warmup must be >= 0 (got {})", opts.warmup);
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
  r.warmup = opts.warmup;
  r.threads = ThreadPool::Global().size();
  r.model_bytes = model.WeightBytes();
  r.weight_bytes_per_token = DecodeWeightBytesPerToken(model.config(), r.model_bytes);
  r.kv_bytes_per_token = cache->BytesPerToken();

  // Warm-up: the prompt and one decode step, untimed, then an empty cache again.
  for (int64_t w = 0; w < opts.warmup; ++w) {
    model.Forward(std::span<const int32_t>(ids.data(), size_t(opts.prompt_tokens)), *cache,
                  logits.data());
    const int32_t next = ArgMax(logits.data(), vocab);
    model.Forward(std::span<const int32_t>(&next, 1), *cache, logits.data());
    cache->Truncate(0);
  }

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
  // Sliding-window layers hold only their window; recurrent state is read once per token, its
  // snapshots (kv_cache.h) not at all.
  const int64_t snaps = int64_t(cache->SnapshotPositions().size());
  r.kv_bytes = cache->MemoryBytes() - cache->RecurrentBytes() * snaps / (1 + snaps);
  r.peak_rss_bytes = PeakRssBytes();
  kernels::Backend& be = model.backend();
  if (be.memory_space() != MemorySpace::kHost) {
    r.device_peak_allocated_bytes = be.PeakAllocatedBytes();
    size_t free_b = 0, total_b = 0;
    be.MemoryInfo(&free_b, &total_b);
    r.device_used_bytes = int64_t(total_b - free_b);
  }
  return r;
}

}  // namespace tq
