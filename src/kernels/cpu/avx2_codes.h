// AVX2 building blocks shared by the int8 kernels on packed codes without AVX-512
// (packed_decode_avx2.cc, packed_prefill_avx2.cc).
//
// A step is 64 codes (two 32-code units u0, u1) held in two ymm of code indices, A and B, in a
// format-specific byte order (PosToCode): q4's is the order two nibble masks of one 32-byte load
// give; every other format is natural (A = u0, B = u1). Activations are stored in the same order,
// one int8 scale per step (per 64 values), so a step's two halves share one fp32 factor.
//
// Codes become signed int8 centroids through the per-tensor codebook scaled to ±127 (centroid =
// table · cb_scale): vpshufb for up to 16 levels; for q8's 256 levels, when the int8 table is
// antisymmetric (table[255 - i] = -table[i], as every codebook for a symmetric density is), the
// magnitude of code c is entry |c - 127.5| - 0.5 of a 128-entry half table (8 vpshufb and a
// 3-level vpblendvb tree on bits 4-6) and its sign is c's top bit: 22 ops per 32 codes instead of
// the 64 of 16 masked vpshufb over the whole table (the fallback kept for other tables). A
// linear q8 codebook (levels[c] = (c - 128) · step, convert's q8 tier: quant::LinearQ8Codebook)
// needs no table: w = c ^ 0x80 as int8, centroid = w · step (quant::IsLinearQ8Levels,
// LookupLinear). vpmaddubsw multiplies unsigned by signed bytes, so a product is |w| · (x with w's
// sign): pair sums stay <= 2·128·127 (no int16 saturation; |w| = 128 only for the linear grid's
// code 0). Affine codes (0..15) are already unsigned. Include only in x86-64 translation units
// whose functions carry TQ_AVX2.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/packed_ops.h"
#include "quant/codebook.h"
#include "quant/format.h"

#define TQ_AVX2 __attribute__((target("avx2,fma,f16c,bmi2")))
#define TQ_AVX2_INLINE TQ_AVX2 inline __attribute__((always_inline))

namespace tq::kernels::cpu::isa::avx2 {

using quant::CodeFormat;
using quant::QuantMethod;

// Offset (0..63) within the step of the code at byte p (0..31: A, 32..63: B).
template <CodeFormat F>
constexpr int PosToCode(int p) {
  if constexpr (F == CodeFormat::kQ4) {
    // One load holds u0's 16 bytes in lane 0 and u1's in lane 1; A takes the low nibbles
    // (codes 0..15 of each unit), B the high nibbles (codes 16..31).
    const int half = p >> 5, unit = (p >> 4) & 1, j = p & 15;
    return unit * 32 + half * 16 + j;
  }
  return p;
}
template <CodeFormat F>
constexpr int kUnitBytes = quant::Traits(F).bytes_per_unit;
template <CodeFormat F>
constexpr int kStepBytes = 2 * kUnitBytes<F>;

// The 32 code indices of one unit in natural order (q2, q3, q8).
template <CodeFormat F>
TQ_AVX2_INLINE __m256i ExpandUnit(const uint8_t* p) {
  if constexpr (F == CodeFormat::kQ8) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  } else {
    static_assert(F == CodeFormat::kQ2 || F == CodeFormat::kQ3);
    uint64_t lo;
    std::memcpy(&lo, p, 8);
    __m256i z = _mm256_srlv_epi64(_mm256_set1_epi64x(int64_t(lo)), _mm256_set_epi64x(6, 4, 2, 0));
    z = _mm256_and_si256(z, _mm256_set1_epi8(0x03));
    if constexpr (F == CodeFormat::kQ3) {
      uint32_t h;
      std::memcpy(&h, p + 8, 4);
      // Byte j gets byte j/8 of h, then its bit j%8.
      const __m256i hb = _mm256_shuffle_epi8(
          _mm256_set1_epi32(int(h)),
          _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0));
      const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
      z = _mm256_or_si256(z, _mm256_and_si256(set, _mm256_set1_epi8(4)));
    }
    return z;
  }
}

// The code indices of one step (A, B).
template <CodeFormat F>
TQ_AVX2_INLINE void ExpandStep(const uint8_t* p, __m256i* a, __m256i* b) {
  if constexpr (F == CodeFormat::kQ4) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i m = _mm256_set1_epi8(0x0F);
    *a = _mm256_and_si256(v, m);
    *b = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
  } else {
    *a = ExpandUnit<F>(p);
    *b = ExpandUnit<F>(p + kUnitBytes<F>);
  }
}

// The codebook scaled to int8, in the forms the lookups need.
struct Tables {
  __m256i t16;             // <= 16 levels: signed centroids in both 128-bit lanes
  __m256i half[8];         // q8, antisymmetric: |centroid of code 128 + 16k + j| at byte j
  __m256i slices[16];      // q8, other tables: centroids 16k .. 16k+15 in both lanes
  bool q8_sym = false;     // q8 takes the half-table lookup
  bool q8_linear = false;  // q8, levels[c] = (c - 128) · step: centroid = int8(c ^ 0x80) · step
  float cb_scale = 1;      // centroid = table · cb_scale
};

// 16 bytes at p in both 128-bit lanes.
TQ_AVX2_INLINE __m256i BothLanes(const int8_t* p) {
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

TQ_AVX2 inline void BuildTables(const PackedMatrix& w, Tables* t) {
  if (w.method == QuantMethod::kAffine) return;
  const int levels = quant::Traits(w.format).levels;
  float amax = 0.0f;
  for (int i = 0; i < levels; ++i) amax = std::max(amax, std::fabs(w.codebook[i]));
  const float s = amax > 0.0f ? 127.0f / amax : 0.0f;
  t->cb_scale = amax > 0.0f ? amax / 127.0f : 0.0f;
  alignas(16) int8_t tab[256] = {};
  for (int i = 0; i < levels; ++i) tab[i] = int8_t(std::lrintf(w.codebook[i] * s));
  if (levels <= 16) {
    t->t16 = BothLanes(tab);
    return;
  }
  if (quant::IsLinearQ8Levels(w.codebook)) {
    t->q8_linear = true;
    t->cb_scale = w.codebook[129];
    return;
  }
  t->q8_sym = true;
  for (int i = 0; i < 128; ++i) t->q8_sym = t->q8_sym && tab[255 - i] == -tab[i];
  alignas(16) int8_t mag[128];  // |centroid of code 128 + i|
  for (int i = 0; i < 128; ++i) mag[i] = int8_t(std::abs(int(tab[128 + i])));
  for (int k = 0; k < 8; ++k) t->half[k] = BothLanes(mag + 16 * k);
  for (int k = 0; k < 16; ++k) t->slices[k] = BothLanes(tab + 16 * k);
}

// A looked-up half step: |w| (u8, <= 127) and a vector with w's sign wherever w != 0.
struct Looked {
  __m256i abs, sign;
};

// Not for q8_linear tables (their half tables are not built): LookupLinear.
template <CodeFormat F>
TQ_AVX2_INLINE Looked Lookup(__m256i code, const Tables& t) {
  if constexpr (F == CodeFormat::kQ8) {
    if (t.q8_sym) {
      // m = 0xFF for codes < 128 (negative centroids); idx = |code - 127.5| - 0.5.
      const __m256i m = _mm256_cmpgt_epi8(code, _mm256_set1_epi8(-1));
      const __m256i idx = _mm256_and_si256(_mm256_xor_si256(code, m), _mm256_set1_epi8(0x7F));
      __m256i r[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_shuffle_epi8(t.half[k], idx);
      // vpblendvb takes each byte's bit 7: bits 6, 5, 4 of idx moved there by 16-bit shifts
      // (a byte's bit 7 after a left shift by s comes from its own bit 7 - s).
      const __m256i b4 = _mm256_slli_epi16(idx, 3), b5 = _mm256_slli_epi16(idx, 2),
                    b6 = _mm256_slli_epi16(idx, 1);
      for (int k = 0; k < 4; ++k) r[k] = _mm256_blendv_epi8(r[2 * k], r[2 * k + 1], b4);
      for (int k = 0; k < 2; ++k) r[k] = _mm256_blendv_epi8(r[2 * k], r[2 * k + 1], b5);
      return {_mm256_blendv_epi8(r[0], r[1], b6), _mm256_or_si256(m, _mm256_set1_epi8(1))};
    }
    // d = code - 16k: slice k's codes have d in [0, 16); adding 0x70 with unsigned saturation
    // sets bit 7 (vpshufb writes 0) for every other code.
    const __m256i step = _mm256_set1_epi8(16), bias = _mm256_set1_epi8(0x70);
    __m256i d = code, wv = _mm256_setzero_si256();
    for (int k = 0; k < 16; ++k) {
      wv = _mm256_or_si256(wv, _mm256_shuffle_epi8(t.slices[k], _mm256_adds_epu8(d, bias)));
      d = _mm256_sub_epi8(d, step);
    }
    return {_mm256_abs_epi8(wv), wv};
  } else {
    const __m256i wv = _mm256_shuffle_epi8(t.t16, code);
    return {_mm256_abs_epi8(wv), wv};
  }
}

// A linear q8 codebook's half step: w = c - 128 is the code with its top bit flipped; |w| <= 128
// fits vpmaddubsw's unsigned operand, so the pair sums stay <= 2·128·127 (no int16 saturation).
TQ_AVX2_INLINE Looked LookupLinear(__m256i code) {
  const __m256i wv = _mm256_xor_si256(code, _mm256_set1_epi8(char(0x80)));
  return {_mm256_abs_epi8(wv), wv};
}

// Signed int8 centroids of 32 codes (for buffers that store them: the GEMM's panels).
template <CodeFormat F>
TQ_AVX2_INLINE __m256i Centroids(__m256i code, const Tables& t) {
  if constexpr (F == CodeFormat::kQ8) {
    if (t.q8_linear) return LookupLinear(code).sign;
  }
  const Looked l = Lookup<F>(code, t);
  return _mm256_sign_epi8(l.abs, l.sign);
}

// Σ over 32 byte pairs of |w| · (x signed like w), as 8 int32 lanes (each a sum of 4 products).
TQ_AVX2_INLINE __m256i DotSigned(const Looked& w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(x, w.sign)),
                           _mm256_set1_epi16(1));
}
// The same for unsigned weights (affine codes <= 15).
TQ_AVX2_INLINE __m256i DotUnsigned(__m256i code, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(code, x), _mm256_set1_epi16(1));
}

TQ_AVX2_INLINE float HorizontalSum(__m256 a) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Prefetches the stored scales (and affine minimums) of rows [r0, r0 + count) into L1 (rows past
// w.rows are left out).
inline void PrefetchScales(const PackedMatrix& w, int64_t r0, int64_t count) {
  count = std::min(count, w.rows - r0);
  if (count <= 0) return;
  const int64_t groups = w.cols / w.group_size;
  const char* ps = static_cast<const char*>(w.ScaleStorage(r0 * groups));
  for (int64_t k = 0; k < count * groups * w.ScaleStorageBytes(); k += 64)
    _mm_prefetch(ps + k, _MM_HINT_T0);
  if (w.mins != nullptr) {
    ps = reinterpret_cast<const char*>(w.mins + r0 * groups);
    for (int64_t k = 0; k < count * groups * 2; k += 64) _mm_prefetch(ps + k, _MM_HINT_T0);
  }
}

// Quantizes one token's steps (cols % 64 == 0): per step, scale = max|x| / 127 and q =
// round-to-nearest-even(x / scale), stored in PosToCode order (q [steps, 64]); xs[s] = the step's
// scale; xsum[s] = Σ of its floats (when not null).
template <CodeFormat F>
TQ_AVX2 void QuantizeSteps(const float* x, int64_t cols, int8_t* q, float* xs, float* xsum) {
  const int64_t steps = cols / 64;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t s = 0; s < steps; ++s) {
    const float* v = x + s * 64;
    __m256 m = _mm256_setzero_ps(), sum = _mm256_setzero_ps();
    for (int k = 0; k < 8; ++k) {
      const __m256 vk = _mm256_loadu_ps(v + 8 * k);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, vk));
      sum = _mm256_add_ps(sum, vk);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    xs[s] = amax / 127.0f;
    if (xsum != nullptr) xsum[s] = HorizontalSum(sum);
    alignas(32) int8_t nat[64];
    for (int k = 0; k < 8; ++k) {
      // cvtps rounds to nearest even (the MXCSR default), as lrintf; |v · inv| <= 127.
      const __m256i qi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 8 * k), inv));
      const __m128i p16 =
          _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(nat + 8 * k), _mm_packs_epi16(p16, p16));
    }
    int8_t* qs = q + s * 64;
    for (int p = 0; p < 64; ++p) qs[p] = nat[PosToCode<F>(p)];
  }
}

}  // namespace tq::kernels::cpu::isa::avx2

#endif
