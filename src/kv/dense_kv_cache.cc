// The plain KV cache: per layer, keys and values as [kv_heads, slots, head_dim] arrays of
// fp16/bf16/fp32 (one head's positions contiguous, so attention streams them). Full-attention
// layers have one slot per position of the context; sliding-window layers have
// KvLayerSlots(window) slots holding positions base .. base+slots-1 (kv_cache.h: when an append
// would run past the last slot, the positions still in the window move to the front). Storage is
// allocated up front through the backend (host: untouched pages cost no memory; cuda: device
// memory), and appends and attention are backend ops.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/device_buffer.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/backend.h"
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
  DenseKvCache(const KvLayout& layout, const KvCacheOptions& opts, kernels::Backend& be)
      : KvCache(layout, opts.max_tokens, opts.max_append, be), dtype_(StorageDType(opts.dtype)) {
    layers_.resize(size_t(layout_.num_layers));
    for (int64_t l = 0; l < layout_.num_layers; ++l) {
      Layer& y = layers_[size_t(l)];
      y.window = layout_.window[size_t(l)];
      y.slots = KvLayerSlots(y.window, opts);
      const size_t bytes = size_t(layout_.num_kv_heads * y.slots * layout_.head_dim) * esize();
      const std::string what = fmt::format("the KV cache (layer {}, {} positions)", l, y.slots);
      y.k = be.Allocate(bytes, what);
      if (!layout_.latent) y.v = be.Allocate(bytes, what);  // the latent's values are its keys
    }
  }

  int64_t BytesPerToken() const override { return layout_.num_layers * PositionBytes(); }

  int64_t MemoryBytes() const override {
    int64_t bytes = 0;
    for (const Layer& y : layers_) bytes += y.high * PositionBytes();
    return bytes + RecurrentBytes();
  }

  int64_t MinTruncate() const override {
    int64_t floor = 0;
    for (const Layer& y : layers_)
      if (y.base > 0) floor = std::max(floor, y.base + y.window - 1);
    return floor;
  }

  void Truncate(int64_t n) override {
    KvCache::Truncate(n);
    if (n == 0)
      for (Layer& y : layers_) y.base = 0;
  }

  void Append(int64_t layer, const float* k, const float* v, int64_t n) override {
    CheckAppend(layer, n);
    Layer& y = layers_[size_t(layer)];
    if (size_ + n - y.base > y.slots) Slide(y, layer, n);  // window layers only
    const int64_t d = layout_.head_dim, heads = layout_.num_kv_heads;
    const int64_t slot0 = size_ - y.base;
    if (layout_.latent) {  // (v: the keys' latent again — only the keys are stored)
      backend_->KvStore(k, n, heads, d, y.k.data(), dtype_, y.slots * d, slot0);
    } else {
      backend_->KvStorePair(k, v, n, heads, d, y.k.data(), y.v.data(), dtype_, y.slots * d, slot0);
    }
    y.high = std::max(y.high, slot0 + n);
  }

  void Attend(int64_t layer, const float* q, int64_t n, float* out) const override {
    CheckAppend(layer, n);
    const Layer& y = layers_[size_t(layer)];
    kernels::KvView view;
    view.k = y.k.data();
    view.v = layout_.latent ? y.k.data() : y.v.data();
    view.dtype = dtype_;
    view.head_stride = y.slots * layout_.head_dim;
    kernels::AttentionParams p;
    p.num_heads = layout_.num_heads;
    p.num_kv_heads = layout_.num_kv_heads;
    p.head_dim = layout_.head_dim;
    p.scale = layout_.scale;
    p.window = y.window;
    // Slot j holds position base + j; the kernel's positions are slots. Queries at slots
    // size-base .. see slots (p-window+1 .. p), all held since base <= size-window+1: the same
    // keys as at absolute positions.
    if (layout_.HasVariant(layer)) {
      kernels::SinkAttentionParams sp;
      sp.num_heads = p.num_heads;
      sp.num_kv_heads = p.num_kv_heads;
      sp.head_dim = sp.v_head_dim = p.head_dim;
      sp.scale = p.scale;
      sp.window = p.window;
      sp.softcap = layout_.softcap;
      sp.sinks = size_t(layer) < layout_.sinks.size() ? layout_.sinks[size_t(layer)] : nullptr;
      backend_->AttentionVariant(q, n, size_ - y.base, view, sp, out);
      return;
    }
    backend_->Attention(q, n, size_ - y.base, view, p, out);
  }

 private:
  struct Layer {
    int64_t window = 0;  // 0 = full attention
    int64_t slots = 0;   // positions stored: [kv_heads, slots, head_dim]
    int64_t base = 0;    // position in slot 0
    int64_t high = 0;    // slots written so far (resident memory)
    DeviceBuffer k, v;   // [kv_heads, slots, head_dim] of dtype_ (no v for a latent layout)
  };

  size_t esize() const { return DTypeSize(dtype_); }
  int64_t PositionBytes() const {
    return (layout_.latent ? 1 : 2) * layout_.num_kv_heads * layout_.head_dim * int64_t(esize());
  }

  // Makes room for n tokens at position size_: keeps positions size_-window+1 .. size_-1 (what
  // the new queries read), moved to slot 0.
  void Slide(Layer& y, int64_t layer, int64_t n) {
    const int64_t keep_from = std::max<int64_t>(0, size_ - y.window + 1);
    TQ_CHECK(y.window > 0 && size_ + n - keep_from <= y.slots, "kv cache",
             "layer {}: {} tokens in one append overflow its {} sliding-window slots (window {} "
             "+ max_append {}); append at most max_append tokens at a time",
             layer, n, y.slots, y.window, max_append_);
    const int64_t shift = keep_from - y.base, count = size_ - keep_from;
    if (shift <= 0) return;
    const size_t row = size_t(layout_.head_dim) * esize();
    for (int64_t h = 0; h < layout_.num_kv_heads; ++h) {
      for (uint8_t* base : {y.k.as<uint8_t>(), y.v.as<uint8_t>()}) {
        if (base == nullptr) continue;  // a latent layout's values are its keys
        uint8_t* head = base + size_t(h * y.slots) * row;
        backend_->Copy(head, head + size_t(shift) * row, size_t(count) * row);
      }
    }
    y.base = keep_from;
  }

  DType dtype_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<KvCache> MakeKvCache(const KvLayout& layout, const KvCacheOptions& opts,
                                     kernels::Backend& backend) {
  if (opts.compressed()) {
    TQ_CHECK(!layout.latent, "kv cache",
             "multi-head latent attention (deepseek) caches its compressed latent ({} values a "
             "token and layer for keys and for values), which the TurboQuant KV cache does not "
             "code: use a plain cache (--kv-dtype f16/bf16/f32 without --kv-bits)",
             layout.head_dim);
    for (int64_t l = 0; l < layout.num_layers; ++l)
      TQ_CHECK(!layout.HasVariant(l), "kv cache",
               "the TurboQuant KV cache does not support {} yet: use a plain cache (--kv-dtype "
               "f16/bf16/f32 without --kv-bits)",
               layout.softcap > 0 ? "soft-capped attention scores (gemma2)"
                                  : "attention sinks (gpt_oss)");
    return MakeTurboQuantKvCache(layout, opts, backend);
  }
  return std::make_unique<DenseKvCache>(layout, opts, backend);
}

}  // namespace tq
