#include "kv/qjl_sketch.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "core/error.h"
#include "core/half.h"
#include "kernels/kv_ops.h"
#include "quant/rng.h"

namespace tq {
namespace {

// Uniform in (0, 1] with 53 random bits (never 0: Box-Muller takes its log).
double Uniform(quant::SplitMix64& rng) { return (double(rng.Next() >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

bool IsValidQjlKeyBits(double total_bits) {
  for (double b : {2.0, 2.5, 3.0, 3.5, 4.0})
    if (total_bits == b) return true;
  return false;
}

KvQjlSketch::KvQjlSketch(int64_t dim, uint64_t seed) : dim_(dim), m_(dim) {
  TQ_CHECK(dim >= 2 && dim <= 1024, "kv qjl", "head_dim {} outside [2, 1024]", dim);
  s_.resize(size_t(m_ * dim_));
  quant::SplitMix64 rng(seed);
  for (size_t i = 0; i < s_.size(); i += 2) {  // Box-Muller: two N(0, 1) per pair of uniforms
    const double radius = std::sqrt(-2.0 * std::log(Uniform(rng)));
    const double angle = 2.0 * std::numbers::pi * Uniform(rng);
    s_[i] = float(radius * std::cos(angle));
    if (i + 1 < s_.size()) s_[i + 1] = float(radius * std::sin(angle));
  }
}

void KvQjlSketch::Project(const float* q, float* sq) const {
  kernels::QjlProject(s_.data(), m_, dim_, q, sq);
}

void KvQjlSketch::Encode(const float* residual, uint8_t* bits, uint16_t* norm) const {
  kernels::EncodeQjlResidual(s_.data(), m_, dim_, residual, bits, norm);
}

double KvQjlSketch::EstimateResidualDot(const float* sq, const uint8_t* bits, uint16_t norm) const {
  return double(F16ToF32(norm)) * kernels::QjlFactor(m_) * kernels::QjlSignDot(sq, bits, m_);
}

}  // namespace tq
