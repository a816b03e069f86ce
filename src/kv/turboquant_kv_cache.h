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
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/aligned_buffer.h"
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

// Process-wide totals over every TurboQuant cache (measurement: perplexity runs). With
// $TQ_KV_STATS=1 they are printed to stderr at exit.
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
  // Roundtrip cosines of the vectors this cache coded so far.
  const KvRoundtripStats& stats() const { return stats_; }

 private:
  struct Layer {
    bool dense = false;
    int64_t dense_index = 0;  // layer index in dense_
    quant::HadamardRotation rk, rv;
    AlignedBuffer<uint16_t> sink_k, sink_v;      // [kv_heads, sink_cap, D] fp16, rotated
    AlignedBuffer<uint16_t> tail_k, tail_v;      // [kv_heads, tail_cap, D] fp16, rotated
    AlignedBuffer<uint8_t> codes_k, codes_v;     // [kv_heads, code_cap, code_bytes]
    AlignedBuffer<uint16_t> scales_k, scales_v;  // [kv_heads, code_cap, groups] fp16
    AlignedBuffer<float> mean_v;                 // [kv_heads, D] rotated value mean (centering)
    KvQjlSketch sketch;                          // opts.qjl: the layer's S
    AlignedBuffer<uint8_t> qjl_bits;             // [kv_heads, code_cap, D / 8] sign(S r)
    AlignedBuffer<uint16_t> qjl_norm;            // [kv_heads, code_cap] ‖r‖ fp16
    // opts.outliers, per split side: [kv_heads, D] channel order, outlier channels first (both
    // subsets ascending); set from the first block of the sequence (per-layer metadata).
    AlignedBuffer<int32_t> order_k, order_v;
    int64_t sink_len = 0, coded = 0, tail_len = 0;
    int64_t stored() const { return sink_len + coded + tail_len; }
  };

  void RollBack(Layer& L, int64_t n) const;  // keeps positions [0, n)
  // Codes one rotated vector of kv head h into code slot `slot`; returns the roundtrip cosine.
  double EncodeInto(Layer& L, bool key, int64_t h, int64_t slot, const float* rotated) const;
  void CodeOldestTail(Layer& L, int64_t m);  // tail positions [0, m) -> coded
  // rot [2, n, H, D] (rotated keys then values): sets the layer's value mean from the first
  // opts_.center positions when the layer is empty, then subtracts it from every value row.
  void Center(Layer& L, float* rot, int64_t n);
  // k, v [n, H, D] of the layer's first Append: picks the outlier channels of each split side.
  void SelectOutliers(Layer& L, const float* k, const float* v, int64_t n) const;

  KvCacheOptions opts_;
  KvVectorCodec kcodec_, vcodec_;
  int64_t sink_cap_ = 0, tail_cap_ = 0, code_cap_ = 0;
  std::vector<Layer> layers_;
  std::unique_ptr<KvCache> dense_;  // fp16 cache of the boundary / sliding-window layers
  KvRoundtripStats stats_;
  std::vector<float> scratch_;  // rotated copies of the appended vectors
  std::vector<double> cos_;     // roundtrip cosines of one Append
};

}  // namespace tq
