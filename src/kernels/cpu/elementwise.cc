// Row-wise and element-wise kernels of the cpu backend (cheap next to the matmuls: plain loops
// the compiler vectorises, fp32 math).
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec.h"
#include "kernels/ref/ref_kernels.h"

namespace tq::kernels::cpu {

TQ_CPU_CLONES void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight,
                           float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const float inv = float(1.0 / std::sqrt(ss / double(dim) + eps));
    float* o = out + r * dim;
    for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
          const float* inv_freq, float attn_factor) {
  const int64_t half = head_dim / 2;
  constexpr int64_t kMaxHalf = 512;
  float c[kMaxHalf], s[kMaxHalf];
  if (half > kMaxHalf) return ref::Rope(x, rows, heads, head_dim, positions, inv_freq, attn_factor);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(positions[r]) * inv_freq[i];
      c[i] = float(std::cos(double(angle))) * attn_factor;
      s[i] = float(std::sin(double(angle))) * attn_factor;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

TQ_CPU_CLONES void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const V16 g = Load16(gate + i);
    Store16(out + i, g / (1.0f + Exp16(-g)) * Load16(up + i));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace tq::kernels::cpu

namespace tq::kernels {
namespace {

using cpu::Broadcast;
using cpu::Exp16;
using cpu::HorizontalSum;
using cpu::Load16;
using cpu::V16;

TQ_CPU_CLONES float MaxOf(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// sum_i e^(x[i] - mx): 16 float lanes of the kernels' vector exp (~2e-7 relative error, each
// term in (0, 1]) over blocks of 256 entries, the blocks added in double.
TQ_CPU_CLONES double SumExp(const float* x, int64_t n, float mx) {
  constexpr int64_t kBlock = 256;
  const V16 m = Broadcast(mx);
  double total = 0.0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    V16 acc{};
    for (int64_t j = i; j < i + kBlock; j += 16) acc += Exp16(Load16(x + j) - m);
    total += double(HorizontalSum(acc));
  }
  for (; i < n; ++i) total += std::exp(double(x[i]) - double(mx));
  return total;
}

}  // namespace

double LogSumExp(const float* x, int64_t n) {
  const float mx = MaxOf(x, n);
  return std::log(SumExp(x, n, mx)) + double(mx);
}

}  // namespace tq::kernels
