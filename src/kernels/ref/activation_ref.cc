// Scalar references of the family activations (double arithmetic).
#include <algorithm>
#include <cmath>

#include "kernels/activation_ops.h"

namespace tq::kernels::ref {

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  const double c = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    out[i] = float(0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x))) * up[i]);
  }
}

void Relu2(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::max(0.0, double(x[i]));
    out[i] = float(r * r);
  }
}

void ClampedSwiglu(const float* gate, const float* up, int64_t n, const ClampedSwigluParams& p,
                   float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(double(gate[i]), double(p.limit));
    const double u = std::clamp(double(up[i]), -double(p.limit), double(p.limit));
    out[i] = float(g / (1.0 + std::exp(-double(p.alpha) * g)) * (u + 1.0));
  }
}

void Softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = float(cap * std::tanh(double(x[i]) / cap));
}

}  // namespace tq::kernels::ref
