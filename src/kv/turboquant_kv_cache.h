// The TurboQuant KV cache (DESIGN.md §3): full-attention layers store every key and value rotated
// (k' = R_k k, v' = R_v v with per-layer signs, seeded and kept in the cache object) and coded by
// KvVectorCodec; attention runs on the codes (kernels/kv_ops.h). Per compressed layer and kv head:
//   positions [0, sink)                 rotated fp16      sink_  [kv_heads, sink, D]
//   positions [sink, sink + coded)      codes + scales    codes_ [kv_heads, capacity - sink, .]
//   the most recent `window` positions  rotated fp16      tail_  [kv_heads, window + 32, D]
// With opts.qjl, every coded key also keeps its QJL residual sketch (kv/qjl_sketch.h) in the
// same slot: sign bits [kv_heads, capacity - sink, D / 8] and ‖r‖ [kv_heads, capacity - sink].
// The tail is coded 32 positions at a time once it holds window + 32 (window 0: every position
// is coded as it is appended, prompts included). Boundary layers and sliding-window layers are
// plain fp16 caches (sliding-window layers keep only their window: kv_cache.h).
// With opts.outliers (the paper's outlier-channel split), a split side's vectors are first
// permuted per kv head (outlier channels first: Layer::order_k / order_v), then rotated by a
// block-diagonal Hadamard rotation whose blocks stay inside each subset, and coded with one
// scale per subset group (KvVectorCodec's outlier constructor).
//
// Storage lives in the backend's memory (Backend::Allocate: host for ref / cpu, device memory for
// cuda) and every append runs as backend ops — GatherColumns (outlier order), Rotate, CenterRows,
// KvStorePair (sink / tail fp16), KvEncode (codes, scales, QJL sketch), Copy (the tail's shift) —
// so that the cache codes and attends on the GPU without a host round trip. Its metadata (span
// lengths, rotations, codecs) stays on the host. The outlier channel order is chosen once per
// layer from the first block (a download on a device: one sync per layer and sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device_buffer.h"
#include "kv/kv_cache.h"
#include "kv/qjl_sketch.h"
#include "kv/turboquant_codec.h"
#include "quant/hadamard.h"

namespace tq {

// Roundtrip quality of the vectors a cache coded: cosine(x, decode(encode(x))).
struct KvRoundtripStats {
  int64_t k_count = 0, v_count = 0;
  double k_cos_sum = 0, v_cos_sum = 0;
  double k_cos_min = 1, v_cos_min = 1;
  double k_mean() const { return k_count ? k_cos_sum / double(k_count) : 1.0; }
  double v_mean() const { return v_count ? v_cos_sum / double(v_count) : 1.0; }
  void Add(bool key, double cos);
  void Merge(const KvRoundtripStats& o);
};

// Process-wide totals over every TurboQuant cache made with opts.roundtrip_stats, added when the
// cache is destroyed (perplexity --kv-stats prints them).
KvRoundtripStats GlobalKvRoundtripStats();

class TurboQuantKvCache final : public KvCache {
 public:
  static constexpr int64_t kBlock = 32;  // tail positions coded at a time

  // Throws tq::Error("[kv cache] ...") naming the bad option.
  TurboQuantKvCache(const KvLayout& layout, const KvCacheOptions& opts,
                    kernels::Backend& backend = kernels::CpuBackend());
  ~TurboQuantKvCache() override;  // adds stats() to GlobalKvRoundtripStats()

  int64_t BytesPerToken() const override;
  void UseBackend(kernels::Backend& be) override;
  void Append(int64_t layer, const float* k, const float* v, int64_t n) override;
  void Attend(int64_t layer, const float* q, int64_t n, float* out) const override;
  void Commit(int64_t n) override;
  void Truncate(int64_t n) override;
  int64_t MinTruncate() const override;  // of the plain (sliding-window) layers
  // Like KvCache::FillSynthetic, in chunks of positions so that coding runs in parallel.
  void FillSynthetic(int64_t n, uint64_t seed) override;

  bool IsCompressed(int64_t layer) const { return !layers_[size_t(layer)].dense; }
  // Keys and values of positions 0 .. count-1 of a compressed layer as attention sees them
  // (decoded, un-rotated) -> k, v [count, kv_heads, head_dim]. For tests.
  void DecodeLayer(int64_t layer, int64_t count, float* k, float* v) const;
  // The attention view of a compressed layer over its stored positions.
  kernels::CompressedKvView View(int64_t layer) const;
  // Decoded keys are the MSE codes' k̂ (the QJL sketch refines scores, it is no reconstruction).
  const KvVectorCodec& key_codec() const { return kcodec_; }
  bool qjl() const { return opts_.qjl; }
  // The QJL sketch of a compressed layer (opts.qjl), else null.
  const KvQjlSketch* qjl_sketch(int64_t layer) const {
    return opts_.qjl && IsCompressed(layer) ? &layers_[size_t(layer)].sketch : nullptr;
  }
  // Bytes of one coded position of one kv head: key codes + scales (+ sign bits + ‖r‖ with qjl)
  // + value codes + scales.
  int64_t CodedBytesPerHead() const;
  const KvVectorCodec& value_codec() const { return vcodec_; }
  // Roundtrip cosines of the vectors this cache coded so far (with opts.roundtrip_stats).
  const KvRoundtripStats& stats() const { return stats_; }

 private:
  struct Layer {
    bool dense = false;
    int64_t dense_index = 0;          // layer index in dense_
    quant::HadamardRotation rk, rv;   // host (the attention view and DecodeLayer)
    DeviceBuffer rk_signs, rv_signs;  // [D] int8: the signs in the backend's memory (Rotate)
    DeviceBuffer sink_k, sink_v;      // [kv_heads, sink_cap, D] fp16, rotated
    DeviceBuffer tail_k, tail_v;      // [kv_heads, tail_cap, D] fp16, rotated
    DeviceBuffer codes_k, codes_v;    // [kv_heads, code_cap, code_bytes]
    DeviceBuffer scales_k, scales_v;  // [kv_heads, code_cap, groups] fp16
    DeviceBuffer mean_v;              // [kv_heads, D] fp32 rotated value mean (centering)
    KvQjlSketch sketch;               // opts.qjl: the layer's S (host)
    DeviceBuffer qjl_matrix;          // S [D, D] in the backend's memory
    DeviceBuffer qjl_bits;            // [kv_heads, code_cap, D / 8] sign(S r)
    DeviceBuffer qjl_norm;            // [kv_heads, code_cap] ‖r‖ fp16
    // opts.outliers, per split side: [kv_heads, D] int32 channel order, outlier channels first
    // (both subsets ascending); set from the first block of the sequence (per-layer metadata).
    DeviceBuffer order_k, order_v;
    int64_t sink_len = 0, coded = 0, tail_len = 0;
    int64_t stored() const { return sink_len + coded + tail_len; }
  };

  void RollBack(Layer& L, int64_t n) const;  // keeps positions [0, n)
  // Codes the tail's oldest m positions (fp16) into the next code slots and shifts the rest.
  void CodeOldestTail(Layer& L, int64_t m);
  // k, v [n, H, D] (backend memory) of the layer's first Append: picks the outlier channels of
  // each split side and writes them to order_k / order_v.
  void SelectOutliers(Layer& L, const float* k, const float* v, int64_t n);
  // KvEncode's format, scale rule and sketch of a side, and its code slots.
  kernels::KvEncodeParams EncodeParams(const Layer& L, bool key) const;
  kernels::KvCodeSlots Slots(Layer& L, bool key) const;
  // With opts.roundtrip_stats (host memory only): the roundtrip cosines of n × H vectors just
  // coded from src (F32 or F16, KvEncode's addressing) into slots slot0 ...
  void RecordRoundtrip(const Layer& L, bool key, const void* src, bool f16, int64_t n,
                       int64_t pos_stride, int64_t head_stride, int64_t slot0);
  // The attention view with every array as `ptr` gives it (the backend's pointers, or host
  // copies for DecodeLayer) and the level tables of `kf`, `vf`.
  template <typename Ptr>
  kernels::CompressedKvView MakeView(const Layer& y, const kernels::KvCodeFormat& kf,
                                     const kernels::KvCodeFormat& vf, Ptr ptr) const;

  KvCacheOptions opts_;
  KvVectorCodec kcodec_, vcodec_;
  // The codecs' formats with their level and threshold tables in the backend's memory.
  kernels::KvCodeFormat kformat_, vformat_;
  std::vector<DeviceBuffer> tables_;  // those tables
  int64_t sink_cap_ = 0, tail_cap_ = 0, code_cap_ = 0;
  std::vector<Layer> layers_;
  std::unique_ptr<KvCache> dense_;  // fp16 cache of the boundary / sliding-window layers
  KvRoundtripStats stats_;
  DeviceBuffer scratch_;  // [2, rows, D] fp32: the rotated keys then values of one Append
};

}  // namespace tq
