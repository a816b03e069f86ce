// AVX-512 building blocks shared by the int8 kernels on packed codes (packed_decode_avx512.cc,
// packed_prefill_avx512.cc): a step of 64 codes (two 32-code units) expanded to one zmm of code
// indices in a format-specific byte order (PosToCode), looked up in the per-tensor codebook scaled
// to u8 (centroid = (table - 128) · cb_scale; affine codes are used as they are).
// Include only in x86-64 translation units whose functions carry TQ_AVX512.
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

#define TQ_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c,bmi2")))
#define TQ_AVX512_INLINE TQ_AVX512 inline __attribute__((always_inline))

namespace tq::kernels::cpu::isa::avx512 {

using quant::CodeFormat;
using quant::QuantMethod;

// Offset (0..63) within the step of the code at zmm byte p, and the bytes a step occupies.
template <CodeFormat F>
constexpr int PosToCode(int p) {
  const int lane = p >> 4, b = p & 15;
  if constexpr (F == CodeFormat::kQ4) return (lane & 1) * 32 + (lane >> 1) * 16 + b;
  if constexpr (F == CodeFormat::kQ2) return (b >> 3) * 32 + 8 * lane + (b & 7);
  return p;  // q3, q8: natural order
}
template <CodeFormat F>
constexpr int kStepBytes = 2 * quant::Traits(F).bytes_per_unit;

// q3: the srlv_epi16 count of each qword (0, 2, 4, 6, 0, 2, 4, 6): qwords 0..3 hold u0's
// low-bit bytes, 4..7 u1's.
TQ_AVX512_INLINE __m512i Q3Shifts() {
  constexpr int64_t k = 0x0001000100010001ll;
  return _mm512_set_epi64(6 * k, 4 * k, 2 * k, 0, 6 * k, 4 * k, 2 * k, 0);
}

// The code indices of one step; kTail: only u0 exists (the row's last, odd unit). kClean = false
// (q2 / q4 only): the bits above each code are left as they are, for a lookup that reads only
// the code's bits of each index byte (LookupRaw: vpermb takes 6 bits, against a table repeated
// every 2^bits entries), one AND less a step.
template <CodeFormat F, bool kTail, bool kClean = true>
TQ_AVX512_INLINE __m512i Expand(const uint8_t* p) {
  if constexpr (F == CodeFormat::kQ4) {
    // Both halves hold the 32 bytes (a broadcast load); the upper half is shifted by 4.
    const __m512i z =
        kTail ? _mm512_broadcast_i64x4(_mm256_maskz_loadu_epi8(0xFFFF, p))
              : _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i sh = _mm512_set_epi64(0x0004000400040004ll, 0x0004000400040004ll,
                                        0x0004000400040004ll, 0x0004000400040004ll, 0, 0, 0, 0);
    const __m512i v = _mm512_srlv_epi16(z, sh);
    return kClean ? _mm512_and_si512(v, _mm512_set1_epi8(0x0F)) : v;
  } else if constexpr (F == CodeFormat::kQ2) {
    const __m128i v = kTail ? _mm_maskz_loadu_epi8(0xFF, p)
                            : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m512i z = _mm512_srlv_epi16(
        _mm512_broadcast_i32x4(v),
        _mm512_set_epi64(6 * 0x0001000100010001ll, 6 * 0x0001000100010001ll,
                         4 * 0x0001000100010001ll, 4 * 0x0001000100010001ll,
                         2 * 0x0001000100010001ll, 2 * 0x0001000100010001ll, 0, 0));
    return kClean ? _mm512_and_si512(z, _mm512_set1_epi8(0x03)) : z;
  } else if constexpr (F == CodeFormat::kQ3) {
    // Step bytes: u0 low bits [0, 8), u0 bit 2 [8, 12), u1 low bits [12, 20), u1 bit 2 [20, 24).
    // u0's 8 low-bit bytes go to qwords 0..3 and u1's to 4..7; qword q is shifted
    // by 2·(q mod 4) so byte p holds code p (natural order); bit 2 comes from a mask register.
    // (A 24-byte masked load + vpermb measured 15% slower than two 8-byte loads.)
    uint64_t lo0, lo1 = 0;
    std::memcpy(&lo0, p, 8);
    if constexpr (!kTail) std::memcpy(&lo1, p + 12, 8);
    // Broadcast loads, the upper half merged by a masked broadcast (no port-5 shuffle).
    const __m512i v = _mm512_mask_set1_epi64(_mm512_set1_epi64(int64_t(lo0)), 0xF0, int64_t(lo1));
    const __m512i z = _mm512_and_si512(_mm512_srlv_epi16(v, Q3Shifts()), _mm512_set1_epi8(0x03));
    uint32_t h0, h1 = 0;
    std::memcpy(&h0, p + 8, 4);
    if constexpr (!kTail) std::memcpy(&h1, p + 20, 4);
    const __mmask64 hi = __mmask64(h0) | (__mmask64(h1) << 32);
    return _mm512_mask_add_epi8(z, hi, z, _mm512_set1_epi8(4));  // bit 2 is clear: add = or
  } else {
    static_assert(F == CodeFormat::kQ8);
    return kTail ? _mm512_maskz_loadu_epi8(0xFFFFFFFFull, p) : _mm512_loadu_si512(p);
  }
}

struct Tables {
  __m512i t16;             // ≤16 levels: the u8 table in each 128-bit lane
  __m512i t64;             // q2 / q4: entry i = the u8 table's entry i mod 2^bits (LookupRaw)
  __m512i t256[4];         // q8: 4 × 64 entries
  bool q8_linear = false;  // q8, levels[c] = (c - 128) · step: the code is its own table entry
  float cb_scale = 1;      // centroid = (table - 128) · cb_scale
};

// kLinear: a linear q8 codebook (Tables::q8_linear), whose code c is the u8 entry c itself.
template <CodeFormat F, bool kAffine, bool kLinear = false>
TQ_AVX512_INLINE __m512i Lookup(__m512i c, const Tables& t) {
  if constexpr (kAffine || kLinear) {
    return c;
  } else if constexpr (F == CodeFormat::kQ8) {
    const __m512i lo = _mm512_permutex2var_epi8(t.t256[0], c, t.t256[1]);
    const __m512i hi = _mm512_permutex2var_epi8(t.t256[2], c, t.t256[3]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), lo, hi);
  } else {
    return _mm512_shuffle_epi8(t.t16, c);
  }
}

// Codebook lookup of Expand<F, kTail, false>'s indices (q2 / q4): vpermb reads the low 6 bits of
// each byte, the code's bits and bits above them that t64's repetition ignores.
template <CodeFormat F>
TQ_AVX512_INLINE __m512i LookupRaw(__m512i c, const Tables& t) {
  static_assert(F == CodeFormat::kQ2 || F == CodeFormat::kQ4);
  return _mm512_permutexvar_epi8(c, t.t64);
}

TQ_AVX512_INLINE float H2F(uint16_t h) { return _cvtsh_ss(h); }

TQ_AVX512 inline void BuildTables(const PackedMatrix& w, Tables* t) {
  if (w.method == QuantMethod::kAffine) return;
  const int levels = quant::Traits(w.format).levels;
  float amax = 0.0f;
  for (int i = 0; i < levels; ++i) amax = std::max(amax, std::fabs(w.codebook[i]));
  const float s = amax > 0.0f ? 127.0f / amax : 0.0f;
  t->cb_scale = amax > 0.0f ? amax / 127.0f : 0.0f;
  if (levels == 256 && quant::IsLinearQ8Levels(w.codebook)) {  // exact: no table, no rounding
    t->q8_linear = true;
    t->cb_scale = w.codebook[129];
    return;
  }
  alignas(64) uint8_t tab[256] = {};
  for (int i = 0; i < levels; ++i) tab[i] = uint8_t(128 + std::lrintf(w.codebook[i] * s));
  if (levels <= 16) {
    t->t16 = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tab)));
    alignas(64) uint8_t rep[64];
    for (int i = 0; i < 64; ++i) rep[i] = tab[i % levels];
    t->t64 = _mm512_load_si512(rep);
  } else {
    for (int k = 0; k < 4; ++k) t->t256[k] = _mm512_load_si512(tab + 64 * k);
  }
}

// The fp32 scales of the groups i0 .. i0+15 (flat index row · groups + group) where m is set,
// 0 elsewhere: fp16 scales, or e8 codes looked up in the per-tensor table.
TQ_AVX512_INLINE __m512 LoadScales(const PackedMatrix& w, int64_t i0, __mmask16 m) {
  if (w.scale_codes != nullptr) {
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, w.scale_codes + i0));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, w.scale_table, 4);
  }
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w.scales + i0));
}

}  // namespace tq::kernels::cpu::isa::avx512

#endif
