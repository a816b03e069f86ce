// Portable SIMD for the cpu backend: GCC vector extensions (16 floats) inside functions cloned
// per ISA with TQ_CPU_CLONES (AVX-512, AVX2+FMA+F16C, baseline), chosen by the loader at run
// time. Helpers here are always_inline so they take the ISA of the clone that calls them.
#pragma once

#include <cstdint>
#include <cstring>

// The vector types are only passed between always_inline helpers of one clone.
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define TQ_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TQ_CPU_CLONES
#endif
#define TQ_INLINE inline __attribute__((always_inline))

namespace tq::kernels::cpu {

typedef float V16 __attribute__((vector_size(64)));
typedef uint32_t U32x16 __attribute__((vector_size(64)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));

TQ_INLINE V16 Load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
TQ_INLINE void Store16(float* p, V16 v) { std::memcpy(p, &v, sizeof(v)); }
// 16 bf16 values -> fp32 (a bf16 is the top half of an fp32).
TQ_INLINE V16 LoadBf16x16(const uint16_t* p) {
  U16x16 h;
  std::memcpy(&h, p, sizeof(h));
  const U32x16 u = __builtin_convertvector(h, U32x16) << 16;
  V16 v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}
TQ_INLINE float HorizontalSum(V16 v) {
  float s = 0;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

}  // namespace tq::kernels::cpu
