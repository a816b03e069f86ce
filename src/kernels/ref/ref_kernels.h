// The scalar reference kernels (internal to kernels/; the model reaches them through
// RefBackend()). Same contracts as ops.h.
#pragma once

#include "kernels/ops.h"

namespace tq::kernels::ref {

void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias, float* y);
void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs);
void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out);
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);
void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
          const float* inv_freq, float attn_factor);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tq::kernels::ref
