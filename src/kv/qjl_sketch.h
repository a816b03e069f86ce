// The QJL residual sketch of a coded key (the paper's TurboQuant_prod, Zandieh et al.; DESIGN.md
// §3, kernels/kv_ops.h): keys are coded by the MSE codec at b-1 bits and the residual
// r = k' - k̂' (rotated domain, the units of the key) keeps m = head_dim sign bits sign(S r) and
// ‖r‖ (fp16). S [m, dim] has i.i.d. N(0, 1) entries drawn from a per-layer seed (SplitMix64 +
// Box-Muller: the same matrix on every platform and standard library). A dense Gaussian S is the
// paper's choice and cheap here: m·dim = 4,096 multiply-adds per coded key at head_dim 64 (the
// codec's own search costs more) and once per query row, 16 KB per layer.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kv_ops.h"

namespace tq {

// k_bits accepted with the sketch (total bits per key channel including the sign bit): 2, 2.5,
// 3, 3.5 or 4, coded by the MSE codec at 1, 1.5, 2, 2.5 or 3 bits.
bool IsValidQjlKeyBits(double total_bits);

class KvQjlSketch {
 public:
  KvQjlSketch() = default;
  // m = dim sign bits; throws tq::Error("[kv qjl] ...") for dim outside [2, 1024].
  KvQjlSketch(int64_t dim, uint64_t seed);

  int64_t dim() const { return dim_; }
  int64_t m() const { return m_; }
  int64_t sign_bytes() const { return kernels::QjlSignBytes(m_); }
  const float* matrix() const { return s_.data(); }  // [m, dim]

  // residual [dim] -> bits [sign_bytes] (bit j: (S r)_j >= 0), *norm = ‖r‖ as fp16.
  void Encode(const float* residual, uint8_t* bits, uint16_t* norm) const;
  // The estimate of ⟨q, r⟩ from a sketch: ‖r‖ √(π/2)/m ⟨S q, sign(S r)⟩ (sq = S q, [m]).
  double EstimateResidualDot(const float* sq, const uint8_t* bits, uint16_t norm) const;
  // sq [m] = S q.
  void Project(const float* q, float* sq) const;

 private:
  int64_t dim_ = 0, m_ = 0;
  std::vector<float> s_;  // [m, dim]
};

}  // namespace tq
