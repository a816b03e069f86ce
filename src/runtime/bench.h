// `turboquant bench`: prefill and decode speed of a model with random token ids (fixed seed),
// plus memory figures. Decode runs greedily (each step feeds the argmax of the last logits).
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_cache.h"
#include "model/expert_cache.h"

namespace tq {

class Model;

struct BenchOptions {
  int64_t prompt_tokens = 512;
  int64_t gen_tokens = 128;
  int64_t context = 0;  // > 0: decode after a context of this many tokens
  // How that context is made: real prefill of random tokens, or KvCache::FillSynthetic (random
  // unit-RMS keys/values: the same attention cost without minutes of prefill). Auto: synthetic
  // above 2048 tokens.
  enum class Fill { kAuto, kPrefill, kSynthetic } fill = Fill::kAuto;
  KvCacheOptions kv;  // max_tokens is set from the above
  uint64_t seed = 1;
  int64_t prefill_chunk = 512;  // context fill runs in chunks of this many tokens
  // Untimed runs of the same prompt and one decode step first (llama-bench's default too): the
  // first products of a process set up libraries (cuBLAS, its kernels) and fault in the weights.
  int64_t warmup = 1;
};

struct BenchResult {
  int64_t prompt_tokens = 0, gen_tokens = 0, warmup = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  int64_t decode_context = 0;  // cache size when decoding started
  std::string context_fill;    // "prompt" (after the prefill) or "prefill" (real tokens)
  int64_t peak_rss_bytes = 0;
  // Device backends (-1 on the host): the most the engine held through the backend (weights,
  // caches, workspace, scratch: Backend::PeakAllocatedBytes), and the card's memory in use at
  // the end (total - free: also the CUDA context and library workspaces, and other processes).
  int64_t device_peak_allocated_bytes = -1, device_used_bytes = -1;
  int64_t model_bytes = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_bytes = 0;  // cache bytes at the end of the decode
  // Weight bytes one decode step reads (estimate from the config: all weights but the input
  // embedding table, of which one row is read; of MoE experts only the routed share).
  int64_t weight_bytes_per_token = 0;
  int threads = 0;
  bool logits_finite = true;  // every logit of every step was finite
  // MoE expert streaming (--expert-cache): the cache's counters over the prefill and over the
  // decode (reset between them), and the resident weight bytes.
  bool expert_streaming = false;
  ExpertCacheStats prefill_experts, decode_experts;
  int64_t resident_weight_bytes = 0;
};

BenchResult RunBench(Model& model, const BenchOptions& opts);

struct ModelConfig;
// See BenchResult::weight_bytes_per_token; `weight_bytes` is Model::WeightBytes().
int64_t DecodeWeightBytesPerToken(const ModelConfig& config, int64_t weight_bytes);

}  // namespace tq
