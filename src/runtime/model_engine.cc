#include "runtime/model_engine.h"

#include "core/error.h"

namespace tq {

ModelEngine::ModelEngine(Model& model, int num_caches, const KvCacheOptions& opts)
    : model_(model), opts_(opts), context_(opts.max_tokens) {
  TQ_CHECK(num_caches >= 1, "serve", "need at least one KV cache");
  owned_.resize(size_t(num_caches));
  caches_.assign(size_t(num_caches), nullptr);
  batch_.reserve(size_t(num_caches));
  bytes_per_token_ = Cache(0).BytesPerToken();
}

ModelEngine::ModelEngine(Model& model, KvCache& cache)
    : model_(model), context_(cache.capacity()), caches_{&cache} {
  bytes_per_token_ = cache.BytesPerToken();
}

KvCache& ModelEngine::Cache(int c) {
  KvCache*& p = caches_.at(size_t(c));
  if (!p) {
    owned_.at(size_t(c)) = model_.NewCache(opts_);
    p = owned_[size_t(c)].get();
  }
  return *p;
}

std::optional<Engine::DeviceMemory> ModelEngine::device_memory() const {
  kernels::Backend& be = model_.backend();
  if (be.memory_space() != MemorySpace::kDevice) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  be.MemoryInfo(&free_bytes, &total_bytes);
  return DeviceMemory{std::string(be.name()), int64_t(free_bytes), int64_t(total_bytes)};
}

int64_t ModelEngine::kv_bytes_held() const {
  int64_t bytes = 0;
  for (const KvCache* c : caches_)
    if (c) bytes += c->MemoryBytes();
  return bytes;
}

void ModelEngine::Truncate(int cache, int64_t n) {
  KvCache& kv = Cache(cache);
  if (n < kv.size()) kv.Truncate(n);
}

int64_t ModelEngine::ReusablePrefix(int cache, int64_t n) {
  const KvCache* p = caches_.at(size_t(cache));
  if (!p || n <= 0) return 0;
  return p->ReusablePrefix(n);  // sliding windows and recurrent-state snapshots (kv_cache.h)
}

void ModelEngine::Prefill(int cache, std::span<const int32_t> tokens, float* logits) {
  model_.Forward(tokens, Cache(cache), logits, /*all_logits=*/false);
}

void ModelEngine::Decode(std::span<const int32_t> tokens, std::span<const int> caches,
                         float* logits) {
  batch_.clear();
  for (int c : caches) batch_.push_back(&Cache(c));
  model_.DecodeBatch(tokens, batch_, logits);
}

void ModelEngine::Step(std::span<const int32_t> tokens, std::span<const Part> parts,
                       float* logits) {
  batch_parts_.clear();
  for (const Part& p : parts) batch_parts_.push_back({&Cache(p.cache), p.count, p.logits});
  model_.ForwardBatch(tokens, batch_parts_, logits);
}

}  // namespace tq
