// The scalar reference backend: one obvious loop per operation, double accumulators, no
// threads. It is the oracle every fast kernel is tested against (DESIGN.md §6).
#include "kernels/ref/ref_kernels.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace tq::kernels {
namespace {

// Element i of a float tensor stored as F32/F16/BF16.
float Load(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::F16:
      return F16ToF32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16:
      return Bf16ToF32(static_cast<const uint16_t*>(p)[i]);
    default:
      Fail("kernels ref", "unsupported dtype {}", DTypeName(dt));
  }
}

}  // namespace

namespace ref {

void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias, float* y) {
  TQ_CHECK(w.rank() == 2, "matmul ref", "weight must be 2-D, got {}", ShapeToString(w.shape));
  const int64_t out = w.dim(0), in = w.dim(1);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias ? bias[o] : 0.0;
      for (int64_t k = 0; k < in; ++k)
        acc += double(x[t * in + k]) * Load(w.data, w.dtype, o * in + k);
      y[t * out + o] = float(acc);
    }
  }
}

void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) {
  for (const MatMulOutput& o : outs) MatMul(x, n, *o.w, o.bias, o.y);
}

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
             float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const float inv = float(1.0 / std::sqrt(ss / double(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = x[r * dim + i] * inv * weight[i];
  }
}

void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
          const float* inv_freq, float attn_factor) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      // fp32 angle, as Hugging Face computes inv_freq ⊗ positions in fp32.
      const float angle = float(positions[r]) * inv_freq[i];
      const float c = float(std::cos(double(angle))) * attn_factor;
      const float s = float(std::sin(double(angle))) * attn_factor;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (r * heads + h) * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out) {
  const int64_t group = p.num_heads / p.num_kv_heads, d = p.head_dim;
  std::vector<double> score(size_t(pos0 + n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = pos0 + i;
    const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
    for (int64_t h = 0; h < p.num_heads; ++h) {
      const float* qh = q + (i * p.num_heads + h) * d;
      const int64_t base = (h / group) * kv.head_stride;
      double mx = -INFINITY;
      for (int64_t t = first; t <= pos; ++t) {
        double s = 0;
        for (int64_t j = 0; j < d; ++j) s += double(qh[j]) * Load(kv.k, kv.dtype, base + t * d + j);
        score[t] = s * p.scale;
        mx = std::max(mx, score[t]);
      }
      double sum = 0;
      for (int64_t t = first; t <= pos; ++t) sum += (score[t] = std::exp(score[t] - mx));
      float* oh = out + (i * p.num_heads + h) * d;
      for (int64_t j = 0; j < d; ++j) {
        double acc = 0;
        for (int64_t t = first; t <= pos; ++t)
          acc += score[t] * Load(kv.v, kv.dtype, base + t * d + j);
        oh[j] = float(acc / sum);
      }
    }
  }
}

}  // namespace ref

}  // namespace tq::kernels
