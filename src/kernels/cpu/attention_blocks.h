// Building blocks shared by the attention kernels of the cpu backend (internal): block sizes,
// fp32 views of cache blocks, dot products and weighted sums. Everything is always_inline so it
// takes the ISA of the cloned kernel that calls it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"
#include "kernels/cpu/vec.h"
#include "kernels/ops.h"

namespace tq::kernels::cpu {

constexpr int64_t kKeyBlock = 64;
constexpr int64_t kQueryBlock = 16;

TQ_INLINE float Dot(const float* a, const float* b, int64_t d) {
  V16 acc = {};
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) acc += Load16(a + j) * Load16(b + j);
  float s = HorizontalSum(acc);
  for (; j < d; ++j) s += a[j] * b[j];
  return s;
}

TQ_INLINE void Axpy(float a, const float* x, float* y, int64_t d) {
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) Store16(y + j, Load16(y + j) + a * Load16(x + j));
  for (; j < d; ++j) y[j] += a * x[j];
}

// acc[0 .. NC*16) += Σ_t p[t * p_stride] · v[t, 0 .. NC*16) with the accumulator held in
// registers; v's rows v_stride floats apart (default: NC*16, whole rows).
template <int NC>
TQ_INLINE void WeightedSum(const float* p, const float* v, int64_t nt, float* acc,
                           int64_t p_stride = 1, int64_t v_stride = NC * 16) {
  V16 a[NC];
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c) a[c] = Load16(acc + c * 16);
  for (int64_t t = 0; t < nt; ++t) {
    const float w = p[t * p_stride];
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) a[c] += w * Load16(v + t * v_stride + c * 16);
  }
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c) Store16(acc + c * 16, a[c]);
}

// rows x d elements of a cache block -> fp32 (or a direct pointer when already fp32).
TQ_INLINE const float* BlockF32(const void* base, DType dt, int64_t offset, int64_t count,
                                float* buf) {
  if (dt == DType::F32) return static_cast<const float*>(base) + offset;
  const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
  if (dt == DType::F16) {
    F16ToF32(src, buf, size_t(count));
  } else {
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t u = uint32_t(src[i]) << 16;
      std::memcpy(buf + i, &u, 4);
    }
  }
  return buf;
}

// The prefill path (attention_wide.cc) for query blocks of at least 16 rows (queries x heads of
// one kv head): rows sit in vector lanes, scores are a small GEMM against Qᵀ. scratch holds
// WideScratchFloats(rows, d) floats.
size_t WideScratchFloats(int64_t rows, int64_t d);
// A slice of the keys (the split decode: fewer tasks than threads over a long context, as MLA's
// one latent KV head gives): only keys [lo, hi) are visited and each row's unnormalized state
// goes to part [rows, 2 + d] = (running max m, sum l, acc[d]) instead of out; Attention merges
// the slices with the log-sum-exp rule. The default visits every key and writes out.
struct KeySlice {
  int64_t lo = 0, hi = INT64_MAX;
  float* part = nullptr;
};
void AttendWide(const float* q, int64_t i0, int64_t i1, int64_t pos0, int64_t kvh, const KvView& kv,
                const AttentionParams& p, const KeySlice& keys, float* out, float* scratch);

}  // namespace tq::kernels::cpu
