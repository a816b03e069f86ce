// Test inputs for quant/: n values of N(0, sigma²) from quant's own SplitMix64 (deterministic for
// a seed on every platform).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/rng.h"

namespace tq::quant {

inline std::vector<float> Gaussian(int64_t n, uint64_t seed, double sigma = 1.0) {
  SplitMix64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = float(sigma * rng.Normal());
  return x;
}

}  // namespace tq::quant
