// Fast CPU paths of the family activations: fp32, branch-free loops the compiler vectorises,
// split across the thread pool for long rows (prefill).
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/activation_ops.h"

namespace tq::kernels::cpu {
namespace {

constexpr int64_t kGrain = 16384;  // elements per task: below this one thread is faster

template <typename F>
void Split(int64_t n, F&& f) {
  if (n < 2 * kGrain) return f(int64_t(0), n);
  ThreadPool::Global().ParallelFor(n, kGrain, f);
}

// tanh(x) = 1 − 2/(e^{2x} + 1), exact to fp32 rounding and free of libm's branchy tanh; the input
// is clamped where tanh is ±1 in fp32 so exp cannot overflow.
inline float FastTanh(float x) {
  x = std::clamp(x, -10.0f, 10.0f);
  return 1.0f - 2.0f / (std::exp(2.0f * x) + 1.0f);
}

}  // namespace

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  const float c = 0.7978845608028654f;  // √(2/π)
  Split(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float x = gate[i];
      out[i] = 0.5f * x * (1.0f + FastTanh(c * (x + 0.044715f * x * x * x))) * up[i];
    }
  });
}

void Relu2(const float* x, int64_t n, float* out) {
  Split(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float r = std::max(0.0f, x[i]);
      out[i] = r * r;
    }
  });
}

void ClampedSwiglu(const float* gate, const float* up, int64_t n, const ClampedSwigluParams& p,
                   float* out) {
  Split(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float g = std::min(gate[i], p.limit);
      const float u = std::clamp(up[i], -p.limit, p.limit);
      out[i] = g / (1.0f + std::exp(-p.alpha * g)) * (u + 1.0f);
    }
  });
}

void Softcap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  Split(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] = cap * FastTanh(x[i] * inv);
  });
}

}  // namespace tq::kernels::cpu
