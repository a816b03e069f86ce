// The host compute API: the cpu backend's kernels called directly on host memory (host-side code:
// the KV codec, convert, perplexity's log-sum-exp, tests). The forward pass and the KV caches do
// not call these: they go through a Backend (backend.h), which is how the same pass runs on ref,
// cpu or cuda. Activations are fp32; weights and KV entries are used as stored (F32/F16/BF16) and
// converted on the fly. Kernels know nothing about models: shapes and strides are all they see.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tq::kernels {

// y[n, out] = x[n, in] · wᵀ (+ bias[out]); w is a row-major [out, in] F32/F16/BF16 tensor,
// bias fp32 or null. y must not alias x.
void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias, float* y);

// One output of a matmul group: y[n, out] = x · wᵀ (+ bias).
struct MatMulOutput {
  const TensorView* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
};
// Several matmuls over the same x (q/k/v; gate/up), at most 16, all with w.dim(1) = in: x is
// read (and, for prefill, transposed) once and every output is computed in one parallel pass.
void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs);

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * weight[:] for rows r < rows; weight fp32
// [dim]. out may alias x.
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);

// Rotary embedding in place on x [rows, heads, head_dim], Hugging Face rotate_half convention:
// dims (i, i + head_dim/2) form a pair rotated by angle positions[r] * inv_freq[i], and cos/sin
// are multiplied by attn_factor (YaRN). inv_freq: [head_dim / 2].
void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
          const float* inv_freq, float attn_factor);

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n. out may alias.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// y[i] += x[i], i < n.
void Add(float* y, const float* x, int64_t n);

// In-place softmax of x[0..n).
void Softmax(float* x, int64_t n);

// log Σ_i e^x[i], computed stably (max subtracted; 16-lane vector exp, blocks summed in double).
double LogSumExp(const float* x, int64_t n);

// Index of the largest element (the first one on ties); n > 0.
int64_t Argmax(const float* x, int64_t n);

// The k largest elements of x[0..n) in descending order (ties: lower index first) -> idx[0..k).
void TopK(const float* x, int64_t n, int64_t k, int32_t* idx);

// Keys and values of one layer as the KV cache stores them: for kv head h and position t the
// head_dim elements at k + (h * head_stride + t * head_dim) (same for v), of dtype F32/F16/BF16.
struct KvView {
  const void* k = nullptr;
  const void* v = nullptr;
  DType dtype = DType::F16;
  int64_t head_stride = 0;  // elements between kv heads (capacity * head_dim)
};

struct AttentionParams {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // divides num_heads (GQA: heads h*G .. h*G+G-1 read kv head h)
  int64_t head_dim = 0;
  float scale = 1.0f;  // applied to q·k (usually 1/sqrt(head_dim))
  int64_t window = 0;  // > 0: a query at position p sees keys p-window+1 .. p only
};

// Causal attention of q [n, num_heads, head_dim] at positions pos0 .. pos0+n-1 over the keys and
// values of positions 0 .. pos0+n-1 in kv -> out [n, num_heads, head_dim].
void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out);

}  // namespace tq::kernels
