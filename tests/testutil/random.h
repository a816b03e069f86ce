// Random test inputs: n draws of N(0, scale²) from a seeded generator (the same values on every
// machine for a seed).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tq::test {

inline std::vector<float> RandomNormal(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace tq::test
