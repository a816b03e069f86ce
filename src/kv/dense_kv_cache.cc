// The plain KV cache: per layer, keys and values as [kv_heads, capacity, head_dim] arrays of
// fp16/bf16/fp32 (one head's positions contiguous, so attention streams them). Storage is
// allocated up front; untouched pages cost no memory.
#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace tq {
namespace {

DType StorageDType(KvDType t) {
  switch (t) {
    case KvDType::kF16:
      return DType::F16;
    case KvDType::kBF16:
      return DType::BF16;
    case KvDType::kF32:
      return DType::F32;
  }
  return DType::F16;
}

class DenseKvCache final : public KvCache {
 public:
  DenseKvCache(const KvLayout& layout, const KvCacheOptions& opts)
      : KvCache(layout, opts.max_tokens), dtype_(StorageDType(opts.dtype)) {
    const size_t per_layer = size_t(layout_.num_kv_heads * capacity_ * layout_.head_dim);
    for (int64_t l = 0; l < layout_.num_layers; ++l) {
      keys_.emplace_back(per_layer * DTypeSize(dtype_));
      values_.emplace_back(per_layer * DTypeSize(dtype_));
    }
  }

  int64_t BytesPerToken() const override {
    return 2 * layout_.num_layers * layout_.num_kv_heads * layout_.head_dim *
           int64_t(DTypeSize(dtype_));
  }

  void Append(int64_t layer, const float* k, const float* v, int64_t n) override {
    CheckAppend(layer, n);
    const int64_t d = layout_.head_dim, heads = layout_.num_kv_heads;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t dst = (h * capacity_ + size_ + i) * d, src = (i * heads + h) * d;
        Store(keys_[size_t(layer)].data(), dst, k + src, d);
        Store(values_[size_t(layer)].data(), dst, v + src, d);
      }
    }
  }

  void Attend(int64_t layer, const float* q, int64_t n, float* out) const override {
    CheckAppend(layer, n);
    kernels::KvView view;
    view.k = keys_[size_t(layer)].data();
    view.v = values_[size_t(layer)].data();
    view.dtype = dtype_;
    view.head_stride = capacity_ * layout_.head_dim;
    kernels::AttentionParams p;
    p.num_heads = layout_.num_heads;
    p.num_kv_heads = layout_.num_kv_heads;
    p.head_dim = layout_.head_dim;
    p.scale = layout_.scale;
    p.window = layout_.window[size_t(layer)];
    kernels::Attention(q, n, size_, view, p, out);
  }

 private:
  void Store(uint8_t* base, int64_t offset, const float* src, int64_t d) const {
    switch (dtype_) {
      case DType::F32:
        std::memcpy(reinterpret_cast<float*>(base) + offset, src, size_t(d) * 4);
        break;
      case DType::F16:
        F32ToF16(src, reinterpret_cast<uint16_t*>(base) + offset, size_t(d));
        break;
      default:
        F32ToBf16(src, reinterpret_cast<uint16_t*>(base) + offset, size_t(d));
        break;
    }
  }

  DType dtype_;
  std::vector<AlignedBuffer<uint8_t>> keys_, values_;
};

}  // namespace

std::unique_ptr<KvCache> MakeKvCache(const KvLayout& layout, const KvCacheOptions& opts) {
  if (opts.compressed()) return MakeTurboQuantKvCache(layout, opts);
  return std::make_unique<DenseKvCache>(layout, opts);
}

}  // namespace tq
