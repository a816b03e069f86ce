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
TQ_INLINE void Store16(float* p, const V16& v) { std::memcpy(p, &v, sizeof(v)); }
// 16 bf16 values -> fp32 (a bf16 is the top half of an fp32).
TQ_INLINE V16 LoadBf16x16(const uint16_t* p) {
  U16x16 h;
  std::memcpy(&h, p, sizeof(h));
  const U32x16 u = __builtin_convertvector(h, U32x16) << 16;
  V16 v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}
typedef float V8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t I32x16 __attribute__((vector_size(64)));

TQ_INLINE float HorizontalSum(const V16& v) {
  const V8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 b =
      __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

TQ_INLINE V16 Broadcast(float x) { return V16{} + x; }

// e^x for 16 lanes (Cephes expf polynomial after x = n·ln2 + r, |r| <= ln2/2): relative error
// about 2e-7. Inputs below -87 give ~1e-38 rather than denormals or 0.
TQ_INLINE V16 Exp16(const V16& in) {
  V16 x = in;
  const V16 lo = Broadcast(-87.0f), hi = Broadcast(88.0f);
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const V16 magic = Broadcast(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V16 n = (x * 1.44269504088896341f + magic) - magic;
  const V16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
  V16 p = Broadcast(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I32x16 bits = (__builtin_convertvector(n, I32x16) + 127) << 23;
  V16 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

}  // namespace tq::kernels::cpu
