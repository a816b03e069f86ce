#include "kv/qjl_sketch.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "core/error.h"
#include "core/half.h"
#include "kernels/kv_ops.h"

namespace tq {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: 53 random bits.
double Uniform(uint64_t& state) { return (double(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

bool IsValidQjlKeyBits(double total_bits) {
  for (double b : {2.0, 2.5, 3.0, 3.5, 4.0})
    if (total_bits == b) return true;
  return false;
}

KvQjlSketch::KvQjlSketch(int64_t dim, uint64_t seed) : dim_(dim), m_(dim) {
  TQ_CHECK(dim >= 2 && dim <= 1024, "kv qjl", "head_dim {} outside [2, 1024]", dim);
  s_.resize(size_t(m_ * dim_));
  uint64_t state = seed;
  for (size_t i = 0; i < s_.size(); i += 2) {  // Box-Muller: two N(0, 1) per pair of uniforms
    const double radius = std::sqrt(-2.0 * std::log(Uniform(state)));
    const double angle = 2.0 * std::numbers::pi * Uniform(state);
    s_[i] = float(radius * std::cos(angle));
    if (i + 1 < s_.size()) s_[i + 1] = float(radius * std::sin(angle));
  }
}

void KvQjlSketch::Project(const float* q, float* sq) const {
  kernels::QjlProject(s_.data(), m_, dim_, q, sq);
}

void KvQjlSketch::Encode(const float* residual, uint8_t* bits, uint16_t* norm) const {
  double rr = 0;
  for (int64_t i = 0; i < dim_; ++i) rr += double(residual[i]) * residual[i];
  float sr[1024];
  Project(residual, sr);
  std::memset(bits, 0, size_t(sign_bytes()));
  for (int64_t j = 0; j < m_; ++j)
    if (sr[j] >= 0) bits[j >> 3] = uint8_t(bits[j >> 3] | 1u << (j & 7));
  *norm = F32ToF16(float(std::sqrt(rr)));
  if (!std::isfinite(F16ToF32(*norm))) *norm = F32ToF16(65504.0f);
}

double KvQjlSketch::EstimateResidualDot(const float* sq, const uint8_t* bits, uint16_t norm) const {
  return double(F16ToF32(norm)) * kernels::QjlFactor(m_) * kernels::QjlSignDot(sq, bits, m_);
}

}  // namespace tq
