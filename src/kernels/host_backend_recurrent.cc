// The recurrent mixers' ops on the host backends: the scalar references (recurrent_ref.cc) on
// `ref`, the fast paths (recurrent_cpu.cc) on `cpu`; the small elementwise ops around them
// (gates, gated norm, partial RoPE) are one loop shared by both.
#include <cmath>

#include "kernels/host_backend.h"
#include "kernels/recurrent_ops.h"

namespace tq::kernels {
namespace {

// torch.nn.functional.softplus (beta 1, threshold 20): x above 20 passes through.
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void HostBackend::CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w,
                               const float* bias, float* state, const Conv1dParams& p, float* y) {
  if (name() == "ref") {
    ref::CausalConv1d(x, n, x_stride, w, bias, state, p, y);
  } else {
    cpu::CausalConv1d(x, n, x_stride, w, bias, state, p, y);
  }
}

void HostBackend::GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                                const float* beta, int64_t n, float* state, const DeltaNetParams& p,
                                float* out) {
  if (name() == "ref") {
    ref::GatedDeltaNet(q, k, v, g, beta, n, state, p, out);
  } else {
    cpu::GatedDeltaNet(q, k, v, g, beta, n, state, p, out);
  }
}

void HostBackend::Ssd(const float* x, const float* B, const float* C, const float* dt,
                      const float* A, const float* D, int64_t n, float* state, const SsdParams& p,
                      float* y) {
  if (name() == "ref") {
    ref::Ssd(x, B, C, dt, A, D, n, state, p, y);
  } else {
    cpu::Ssd(x, B, C, dt, A, D, n, state, p, y);
  }
}

void HostBackend::DeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n,
                                int64_t heads, const float* a_log, const float* dt_bias, float* g,
                                float* beta) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float av = a[t * stride + h], bv = b[t * stride + h];
      g[t * heads + h] = -std::exp(a_log[h]) * Softplus(av + dt_bias[h]);
      beta[t * heads + h] = 1.0f / (1.0f + std::exp(-bv));
    }
  }
}

void HostBackend::GatedRmsNorm(const float* x, int64_t rows, int64_t dim, const float* z,
                               const float* weight, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
    float* o = out + r * dim;
    for (int64_t i = 0; i < dim; ++i) {
      const float silu = zr[i] / (1.0f + std::exp(-zr[i]));
      o[i] = xr[i] * inv * weight[i] * silu;
    }
  }
}

void HostBackend::PartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim,
                              int64_t rotary_dim, const int64_t* positions, const float* inv_freq,
                              float attn_factor) {
  const int64_t half = rotary_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      // fp32 angle (as Hugging Face), cos/sin in double then rounded, as the Rope op.
      const float angle = float(positions[r]) * inv_freq[i];
      const float c = float(std::cos(double(angle))) * attn_factor;
      const float s = float(std::sin(double(angle))) * attn_factor;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (r * heads + h) * head_dim;
        const float p = v[i], q = v[i + half];
        v[i] = p * c - q * s;
        v[i + half] = q * c + p * s;
      }
    }
  }
}

}  // namespace tq::kernels
