// The recurrent mixers' ops on the host backends: the scalar references (recurrent_ref.cc) on
// `ref`, the fast paths (recurrent_cpu.cc) on `cpu`; the small elementwise ops around them
// (gates, gated norm, partial RoPE) are one loop shared by both.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/activation_ops.h"
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

void HostBackend::GatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group,
                               const float* z, const float* weight, float eps, bool gate_first,
                               float* out) {
  auto silu = [](float v) { return v / (1.0f + std::exp(-v)); };
  std::vector<float> u(static_cast<size_t>(group));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < dim; g0 += group) {
      const float* xr = x + r * dim + g0;
      const float* zr = z + r * dim + g0;
      for (int64_t i = 0; i < group; ++i) u[size_t(i)] = gate_first ? xr[i] * silu(zr[i]) : xr[i];
      float ss = 0;
      for (int64_t i = 0; i < group; ++i) ss += u[size_t(i)] * u[size_t(i)];
      const float inv = 1.0f / std::sqrt(ss / float(group) + eps);
      float* o = out + r * dim + g0;
      for (int64_t i = 0; i < group; ++i) {
        const float v = u[size_t(i)] * inv * weight[g0 + i];
        o[i] = gate_first ? v : v * silu(zr[i]);
      }
    }
  }
}

void HostBackend::SsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads,
                        const float* bias, float lo, float hi, float* out) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < heads; ++h)
      out[t * heads + h] = std::clamp(Softplus(dt[t * stride + h] + bias[h]), lo, hi);
}

void HostBackend::Relu2(const float* x, int64_t n, float* out) {
  if (name() == "ref") {
    ref::Relu2(x, n, out);
  } else {
    cpu::Relu2(x, n, out);
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
