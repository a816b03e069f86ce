// SplitMix64 (Steele, Lea, Flood 2014): the one deterministic generator of the quant layer (sign
// vectors, vector-codebook training, tests). Its output sequence for a seed is part of the
// checkpoint format's documentation (docs/FORMAT.md), so it must never change.
#pragma once

#include <cmath>
#include <cstdint>

namespace tq::quant {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return double(Next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller, both values used).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1;
    do {
      u1 = Uniform();
    } while (u1 <= 0.0);
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace tq::quant
