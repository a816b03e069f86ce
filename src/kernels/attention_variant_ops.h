// Attention variants of the newer families over an fp32 cache, scalar reference (ref::) and fast
// CPU path (cpu::):
//  - AttentionSinkSoftcap: causal softmax attention with optional tanh soft-capping of the scores
//    (gemma2), a learned per-head sink logit in the softmax denominator (gpt_oss) and v_head_dim
//    != head_dim;
//  - ref::MlaAttention: DeepSeek multi-head latent attention on the latent cache, decompressing
//    every cached latent into per-head keys and values: the oracle the forward pass's absorbed
//    form (model/mla_absorb.h: HeadMatMul, then Attention on the latent, then HeadMatMul) is
//    tested against.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace tq::kernels {

// Cache layout: for kv head h and position t, k + h * k_head_stride + t * head_dim (same for v
// with v_head_dim), fp32.
struct SinkAttentionParams {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, v_head_dim = 0;
  int64_t k_head_stride = 0, v_head_stride = 0;
  float scale = 1.0f;
  int64_t window = 0;            // > 0: a query at p sees keys p-window+1 .. p
  float softcap = 0;             // > 0: s <- softcap · tanh(s / softcap) after scaling
  const float* sinks = nullptr;  // [num_heads] logits, or null
};

// q [n, num_heads, head_dim] at positions pos0 .. pos0+n-1 over cached positions 0 .. pos0+n-1
// -> out [n, num_heads, v_head_dim].
// MLA: q [n, H, nope + rope] per head [q_nope | q_pe]; latent [T, kv_lora + rope] rows
// [c_kv (normalised) | k_pe (rotated)]; w_kv_b [H · (nope + v), kv_lora] fp32 with per-head row
// blocks [W_UK (nope rows) ; W_UV (v rows)] -> out [n, H, v].
struct MlaParams {
  int64_t num_heads = 0, nope_dim = 0, rope_dim = 0, v_dim = 0, kv_lora = 0;
  float scale = 1.0f;
};

// Keys and values of positions 0 .. count-1 of a plain cache (KvView: [kv_heads, slots,
// head_dim] of F32/F16/BF16) as fp32 [kv_heads, count, head_dim] in k, v (resized): how the
// variants read an f16/bf16 cache (an f32 one is read in place).
void KvToF32(const KvView& kv, int64_t kv_heads, int64_t head_dim, int64_t count,
             std::vector<float>& k, std::vector<float>& v);

namespace ref {
void AttentionSinkSoftcap(const float* q, int64_t n, int64_t pos0, const float* k, const float* v,
                          const SinkAttentionParams& p, float* out);
void MlaAttention(const float* q, int64_t n, int64_t pos0, const float* latent, const float* w_kv_b,
                  const MlaParams& p, float* out);
// AttentionSinkSoftcap over a plain cache (v_head_dim = head_dim; the strides come from kv).
void AttentionVariantKv(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                        const SinkAttentionParams& p, float* out);
}  // namespace ref

namespace cpu {
void AttentionSinkSoftcap(const float* q, int64_t n, int64_t pos0, const float* k, const float* v,
                          const SinkAttentionParams& p, float* out);
void AttentionVariantKv(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                        const SinkAttentionParams& p, float* out);
}  // namespace cpu

}  // namespace tq::kernels
