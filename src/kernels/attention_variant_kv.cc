// The attention variants over a plain KV cache (kernels/attention_variant_ops.h): an f32 cache is
// read in place, an f16/bf16 one converted to fp32 first (positions 0 .. pos0+n-1 only).
#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/attention_variant_ops.h"

namespace tq::kernels {

void KvToF32(const KvView& kv, int64_t kv_heads, int64_t head_dim, int64_t count,
             std::vector<float>& k, std::vector<float>& v) {
  const size_t per_head = size_t(count * head_dim);
  k.resize(size_t(kv_heads) * per_head);
  v.resize(size_t(kv_heads) * per_head);
  for (int64_t h = 0; h < kv_heads; ++h) {
    const size_t src = size_t(h * kv.head_stride), dst = size_t(h) * per_head;
    for (auto [from, to] : {std::pair{kv.k, k.data()}, std::pair{kv.v, v.data()}}) {
      switch (kv.dtype) {
        case DType::F32:
          std::copy_n(static_cast<const float*>(from) + src, per_head, to + dst);
          break;
        case DType::F16:
          F16ToF32(static_cast<const uint16_t*>(from) + src, to + dst, per_head);
          break;
        case DType::BF16:
          Bf16ToF32(static_cast<const uint16_t*>(from) + src, to + dst, per_head);
          break;
        default:
          Fail("attention variant", "KV cache dtype {} is not F32/F16/BF16", DTypeName(kv.dtype));
      }
    }
  }
}

namespace {

// Runs `kernel` (ref:: or cpu::AttentionSinkSoftcap) on fp32 views of the cache.
template <typename Kernel>
void OnPlainCache(Kernel kernel, const float* q, int64_t n, int64_t pos0, const KvView& kv,
                  const SinkAttentionParams& p, float* out) {
  TQ_CHECK(p.v_head_dim == p.head_dim, "attention variant",
           "a plain cache holds v_head_dim = head_dim, got {} and {}", p.v_head_dim, p.head_dim);
  if (n <= 0) return;
  SinkAttentionParams q_p = p;
  if (kv.dtype == DType::F32) {
    q_p.k_head_stride = q_p.v_head_stride = kv.head_stride;
    kernel(q, n, pos0, static_cast<const float*>(kv.k), static_cast<const float*>(kv.v), q_p, out);
    return;
  }
  thread_local std::vector<float> k, v;
  KvToF32(kv, p.num_kv_heads, p.head_dim, pos0 + n, k, v);
  q_p.k_head_stride = q_p.v_head_stride = (pos0 + n) * p.head_dim;
  kernel(q, n, pos0, k.data(), v.data(), q_p, out);
}

}  // namespace

void ref::AttentionVariantKv(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                             const SinkAttentionParams& p, float* out) {
  OnPlainCache(ref::AttentionSinkSoftcap, q, n, pos0, kv, p, out);
}

void cpu::AttentionVariantKv(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                             const SinkAttentionParams& p, float* out) {
  OnPlainCache(cpu::AttentionSinkSoftcap, q, n, pos0, kv, p, out);
}

}  // namespace tq::kernels
