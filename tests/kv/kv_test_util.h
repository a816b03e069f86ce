// Shared by the KV-cache tests: a small layout, Gaussian data, normalised squared error.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kv/kv_cache.h"

namespace tq::kvtest {

// 8 query heads over 2 kv heads of head_dim d, every layer full attention (window 0).
inline KvLayout Layout(int64_t layers = 3, int64_t d = 64) {
  KvLayout l;
  l.num_layers = layers;
  l.num_heads = 8;
  l.num_kv_heads = 2;
  l.head_dim = d;
  l.scale = 1.0f / std::sqrt(float(d));
  l.window.assign(size_t(layers), 0);
  return l;
}

// n values ~ N(0, scale²).
inline std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (auto& e : x) e = normal(rng) * scale;
  return x;
}

// ‖a − b‖² / ‖b‖².
inline double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * double(a[i] - b[i]);
    norm += b[i] * double(b[i]);
  }
  return err / norm;
}

}  // namespace tq::kvtest
