#include "core/half.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tq {

#if defined(__x86_64__)
// F16C paths, compiled for that target and chosen at run time.
__attribute__((target("f16c,avx"))) static void F16ToF32F16c(const uint16_t* s, float* d,
                                                             size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
  for (; i < n; ++i) d[i] = F16ToF32(s[i]);
}
__attribute__((target("f16c,avx"))) static void F32ToF16F16c(const float* s, uint16_t* d,
                                                             size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = F32ToF16(s[i]);
}
// clang (14) has no "f16c" for __builtin_cpu_supports: read CPUID leaf 1 (ECX bit 29) directly.
static bool CpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
static const bool kHasF16c = CpuHasF16c() && __builtin_cpu_supports("avx");
#endif

void Bf16ToF32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}

void F16ToF32(const uint16_t* src, float* dst, size_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return F16ToF32F16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void F32ToBf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = F32ToBf16(src[i]);
}

void F32ToF16(const float* src, uint16_t* dst, size_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return F32ToF16F16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

}  // namespace tq
