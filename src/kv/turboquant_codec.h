// The TurboQuant codec of one key or value vector (DESIGN.md §3), applied after the layer's
// rotation x' = R x: channels are split into scale groups of `group` channels (the whole head for
// head_dim <= 128, else 128 or the Hadamard block); each group stores one fp16 scale σ and
// codes of x'_i / σ against a fixed codebook:
//   - 1, 2, 3, 4 bits: Lloyd-Max for N(0, 1) (plain TurboQuant) or for the exact coordinate
//     distribution of a rotated unit vector in ℝ^group scaled by √group ("sphere");
//   - 8 bits: an int8-grade uniform grid (255 equal steps, the step MSE-optimal for the same
//     density), so kernels decode it with a convert instead of a table lookup;
//   - 1.5 / 2.5 / 3.5 bits: the paper's fixed channel split, the first half of the rotated channels
//   at
//     b+1 bits and the second half at b (all rotated channels are alike, so the split is fixed).
// σ is the group's RMS (= ‖x‖/√D for one group: "norm"), the per-vector MSE-optimal scale
// ("mse": σ = ⟨x', c⟩/⟨c, c⟩ alternated with re-assignment, never worse than the RMS), or
// "unbiased": the mse codes with σ = ‖x'‖²/⟨x', c⟩, so that x̂ = x + (noise ⟂ x). Lloyd-Max
// reconstructions are shrunk (x̂·x ≈ (1 - mse)‖x‖²): a bias that attention does not average away.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kv_ops.h"
#include "kv/kv_cache.h"
#include "quant/codebook.h"

namespace tq {

// 2, 2.5, 3, 3.5, 4 or 8: the widths a cache's k_bits / v_bits take.
bool IsValidKvBits(double bits);
// What KvVectorCodec codes: those, and 1 / 1.5 (keys under the QJL sketch at 2 / 2.5 bits in all).
bool IsValidKvCodecBits(double bits);

// The scale group of head_dim channels: head_dim itself up to 128 when it is a power of two,
// else the largest power of two <= 128 dividing it.
int64_t KvScaleGroup(int64_t head_dim);

// The paper's outlier-channel split of a `dim`-channel vector at `bits` per channel (before any
// sketch): `outliers` channels at `hi` bits and the other dim - outliers at `lo` bits, hi > lo,
// both in {1, 2, 3, 4}, with outliers * hi + (dim - outliers) * lo == bits * dim exactly (the
// largest such lo). Nothing when no pair gives exactly `bits` (e.g. 4 bits: it would need 5).
struct KvOutlierWidths {
  int hi = 0, lo = 0;
};
std::optional<KvOutlierWidths> KvOutlierSplit(int64_t dim, double bits, int64_t outliers);
// Why `outliers` channels of `dim` cannot be split (a usage message), or empty: needs
// 0 < outliers < dim and outliers a multiple of 32 (codes pack in units of 32 channels).
std::string KvOutlierCountProblem(int64_t dim, int64_t outliers);
// The scale group of a split vector: the largest power of two <= 128 dividing both outliers and
// dim - outliers, so that every group lies in one subset (one scale per subset when that is 1
// group each; for head_dim 64 and 32 outliers: 32).
int64_t KvOutlierGroup(int64_t dim, int64_t outliers);

class KvVectorCodec {
 public:
  // Throws tq::Error("[kv codec] ...") for an unsupported bit width or dim.
  KvVectorCodec(int64_t dim, double bits, KvScale scale, KvCodebook codebook);
  // The outlier split: channels [0, outliers) at w.hi bits, [outliers, dim) at w.lo bits, scale
  // groups of KvOutlierGroup(dim, outliers) (the vector arrives with its outlier channels first,
  // each subset rotated on its own: turboquant_kv_cache.h).
  KvVectorCodec(int64_t dim, int64_t outliers, KvOutlierWidths w, KvScale scale,
                KvCodebook codebook);

  const kernels::KvCodeFormat& format() const { return format_; }
  int64_t dim() const { return format_.dim; }
  int64_t code_bytes() const { return format_.code_bytes; }
  int64_t groups() const { return format_.groups(); }
  double bits() const { return bits_; }           // code bits per channel (scales not counted)
  int64_t outliers() const { return outliers_; }  // 0: no outlier split

  // rotated [dim] -> codes [code_bytes], scales [groups] (fp16): kernels::EncodeKvVector.
  void Encode(const float* rotated, uint8_t* codes, uint16_t* scales) const;
  // The inverse (up to the quantization error): codes, scales -> rotated [dim].
  void Decode(const uint8_t* codes, const uint16_t* scales, float* rotated) const {
    kernels::DecodeKvVector(format_, codes, scales, rotated);
  }

 private:
  struct Segment {
    std::shared_ptr<const quant::Codebook> book;
  };
  // Segments: channels [0, cut) at hi bits, [cut, dim) at lo bits (one segment when cut == dim).
  void Init(int64_t dim, int64_t group, int64_t cut, int hi, int lo, KvCodebook codebook);

  double bits_;
  int64_t outliers_ = 0;
  KvScale scale_;
  kernels::KvCodeFormat format_;
  Segment segments_[2];
};

}  // namespace tq
