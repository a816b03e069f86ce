// The real Engine (runtime/engine.h): a tq::Model with KV caches, either a pool it makes (the
// server: `num_caches` caches of opts.max_tokens tokens, allocated on first use) or one cache
// the caller owns (the CLI's and the library's Generator).
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace tq {

class ModelEngine : public Engine {
 public:
  // `num_caches` caches of opts.max_tokens tokens each, allocated on first use.
  ModelEngine(Model& model, int num_caches, const KvCacheOptions& opts);
  // One cache, `cache` (not owned; it must outlive the engine): context = its capacity.
  ModelEngine(Model& model, KvCache& cache);

  int64_t vocab_size() const override { return model_.vocab_size(); }
  int64_t context_length() const override { return context_; }
  int num_caches() const override { return int(caches_.size()); }
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  int64_t kv_bytes_held() const override;  // KvCache::MemoryBytes over the caches
  std::optional<DeviceMemory> device_memory() const override;
  void Truncate(int cache, int64_t n) override;
  int64_t ReusablePrefix(int cache, int64_t n) override;
  void Prefill(int cache, std::span<const int32_t> tokens, float* logits) override;
  void Decode(std::span<const int32_t> tokens, std::span<const int> caches, float* logits) override;
  // Model::ForwardBatch: decode rows and prompt chunks in one pass over the weights.
  void Step(std::span<const int32_t> tokens, std::span<const Part> parts, float* logits) override;

 private:
  KvCache& Cache(int c);

  Model& model_;
  const KvCacheOptions opts_;
  int64_t context_ = 0;
  std::vector<std::unique_ptr<KvCache>> owned_;  // the pool (empty when borrowing one cache)
  std::vector<KvCache*> caches_;                 // [num_caches]; null until first use
  std::vector<KvCache*> batch_;                  // scratch for Decode
  std::vector<Model::BatchPart> batch_parts_;    // scratch for Step
  int64_t bytes_per_token_ = 0;
};

}  // namespace tq
