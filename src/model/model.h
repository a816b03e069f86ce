// A decoder-only transformer loaded from a Hugging Face directory (config.json + safetensors,
// mmapped). One generic forward pass (forward.cc) serves every architecture (architecture.h) and
// runs on the Backend chosen at load (kernels/backend.h: ref, cpu or cuda): the weights live in
// its memory (cpu: the mmapped file itself), and so do the caches NewCache makes.
//
// Not thread-safe: one Forward/DecodeBatch at a time per Model (they share a workspace).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"

namespace tq {

class Checkpoint;
class ExpertCache;
struct ExpertCacheStats;
struct ModelWeights;
struct ForwardWorkspace;
struct Architecture;

struct ModelLoadOptions {
  // The backend: "cpu", "ref", "cuda[:N]", or "" = kernels::DefaultDeviceName()
  // ($TURBOQUANT_DEVICE, else auto: the GPU when the build has CUDA and one is present, else cpu).
  std::string device;
  // MoE expert streaming (model/expert_cache.h): < 0 keeps every expert resident; else experts
  // are read on demand into a cache of this many bytes (it must hold at least one expert).
  int64_t expert_cache_bytes = -1;
  std::string expert_cache_policy = "lru";  // "lru" | "lfu"
  int expert_readers = 2;                   // prefetch reader threads (0: no prefetch)
  bool expert_host_copy = true;  // device: experts in pinned host memory (ExpertCacheOptions)
  // Device backends: what the engine may allocate on the card, bytes (0: no limit beyond the
  // card's; Backend::SetMemoryLimit). Host backends refuse a limit.
  int64_t device_memory_limit = 0;
};

class Model {
 public:
  // config.json + safetensors (mmap) + architecture, weights placed on the backend; errors name
  // the file, tensor or field (and, on a device, what did not fit).
  static std::unique_ptr<Model> Load(const std::string& dir, const ModelLoadOptions& opts = {});
  ~Model();

  kernels::Backend& backend() const { return *backend_; }

  const ModelConfig& config() const { return config_; }
  const Architecture& architecture() const { return *arch_; }
  int64_t vocab_size() const { return config_.vocab_size; }
  int64_t WeightBytes() const;  // bytes of weights as loaded
  // Bytes of weights kept in memory: WeightBytes() less the streamed experts' storage.
  int64_t ResidentWeightBytes() const;
  // The expert cache (null: every expert resident).
  ExpertCache* expert_cache() const { return expert_cache_.get(); }
  KvLayout kv_layout() const;
  std::unique_ptr<KvCache> NewCache(const KvCacheOptions& opts) const;

  // Runs tokens (a prompt chunk or one decode token) at positions cache.size() ..
  // cache.size()+n-1, appends their K/V, and writes logits: [n, vocab] if all_logits else
  // [1, vocab] for the last token. Prefill runs as matrix-matrix passes. Throws (leaving the
  // cache as it was) if the cache would overflow or a token id is out of range.
  void Forward(std::span<const int32_t> tokens, KvCache& cache, float* logits,
               bool all_logits = false);
  // The same pass, but what comes out is the final hidden state of every position (after the
  // final norm, before the LM head): hidden [n, hidden_size], what embeddings are made of.
  void ForwardHidden(std::span<const int32_t> tokens, KvCache& cache, float* hidden);

  // Continuous batching: one new token for each of several sequences (distinct caches), one
  // pass over the weights for all of them, attention per sequence. logits [batch, vocab].
  void DecodeBatch(std::span<const int32_t> tokens, std::span<KvCache* const> caches,
                   float* logits);

  // Continuous batching with prompts (the server's step): decode tokens and prompt chunks of
  // several sequences (distinct caches) in ONE pass over the weights. Part i runs the next
  // `count` tokens of `tokens` (the parts back to back) at positions cache->size() ... and, when
  // `logits`, its last token's logits go to the next row of `logits` [parts with logits, vocab].
  // Throws before any cache changes on a bad token id, an overflow or a repeated cache. The
  // workspace grows with tokens.size(): callers bound it (Forward chunks prompts at 512).
  struct BatchPart {
    KvCache* cache = nullptr;
    int64_t count = 0;
    bool logits = false;
  };
  void ForwardBatch(std::span<const int32_t> tokens, std::span<const BatchPart> parts,
                    float* logits);

 private:
  Model();
  // Rows [begin, begin + count) of a batch belong to one sequence.
  struct Segment {
    KvCache* cache;
    int64_t begin, count;
  };
  void Run(std::span<const int32_t> tokens, std::span<const Segment> segments,
           std::span<const int64_t> logit_rows, float* logits);
  void CheckCache(const KvCache& cache, int64_t n) const;
  // Forward / ForwardHidden: chunks of the prompt through Run; `hidden` selects the output.
  void ForwardChunks(std::span<const int32_t> tokens, KvCache& cache, float* out, bool all_rows,
                     bool hidden);
  void CheckTokens(std::span<const int32_t> tokens) const;

  ModelConfig config_;
  kernels::Backend* backend_ = nullptr;
  const Architecture* arch_ = nullptr;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<ExpertCache> expert_cache_;  // after weights_: destroyed first
  std::unique_ptr<ForwardWorkspace> ws_;
  std::vector<Segment> segments_;  // DecodeBatch's, reused
  bool hidden_rows_ = false;       // Run writes final-normed hidden rows, not logits
};

}  // namespace tq
