// Packed weights -> bf16 panels for the AMX GEMM (packed_matmul_amx.h). Per 32-code unit: the
// codes become two zmm of 16 int32 indices (natural order, docs/FORMAT.md "Packing"), the values
// come from a vpermps of the codebook (<= 16 levels) or a gather (q8), times the group's scale
// (affine: min + scale · code), and one vcvtne2ps2bf16 writes the unit's 32 bf16. Group scales
// are fp16 or e8 (a u8 code into the per-tensor fp32 table), converted to fp32 16 groups at a
// time; with groups of 16 the unit's two index vectors take one group each.
#include "kernels/cpu/packed_matmul_amx.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/amx_gemm.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#define TQ_DQ_BUILD 1
#define TQ_DQ __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))
#define TQ_DQ_INLINE TQ_DQ inline __attribute__((always_inline))
#endif

namespace tq::kernels::cpu {

using quant::CodeFormat;

#if defined(TQ_DQ_BUILD)
namespace {

// Indices of codes 0..15 (i0) and 16..31 (i1) of the unit at p.
template <CodeFormat F>
TQ_DQ_INLINE void Expand(const uint8_t* p, __m512i* i0, __m512i* i1) {
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  if constexpr (F == CodeFormat::kQ4) {  // c[j] = p[j] & 15, c[j + 16] = p[j] >> 4
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    *i0 = _mm512_and_si512(b, _mm512_set1_epi32(15));
    *i1 = _mm512_srli_epi32(b, 4);
  } else if constexpr (F == CodeFormat::kQ2 || F == CodeFormat::kQ3) {
    // c[8k + j] = (p[j] >> 2k) & 3 (j < 8); q3 adds bit j of the uint32 at p + 8, times 4.
    uint64_t lo;
    std::memcpy(&lo, p, 8);
    const __m512i b = _mm512_cvtepu8_epi32(_mm_set1_epi64x(int64_t(lo)));
    const __m512i s01 = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i three = _mm512_set1_epi32(3);
    *i0 = _mm512_and_si512(_mm512_srlv_epi32(b, s01), three);
    *i1 =
        _mm512_and_si512(_mm512_srlv_epi32(b, _mm512_add_epi32(s01, _mm512_set1_epi32(4))), three);
    if constexpr (F == CodeFormat::kQ3) {
      uint32_t h;
      std::memcpy(&h, p + 8, 4);
      const __m512i hv = _mm512_set1_epi32(int(h)), one = _mm512_set1_epi32(1);
      *i0 = _mm512_or_si512(
          *i0, _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(hv, iota), one), 2));
      const __m512i iota16 = _mm512_add_epi32(iota, _mm512_set1_epi32(16));
      *i1 = _mm512_or_si512(
          *i1, _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(hv, iota16), one), 2));
    }
  } else if constexpr (F == CodeFormat::kQ1) {  // bit j of the uint32 at p
    uint32_t h;
    std::memcpy(&h, p, 4);
    const __m512i hv = _mm512_set1_epi32(int(h)), one = _mm512_set1_epi32(1);
    *i0 = _mm512_and_si512(_mm512_srlv_epi32(hv, iota), one);
    *i1 =
        _mm512_and_si512(_mm512_srlv_epi32(hv, _mm512_add_epi32(iota, _mm512_set1_epi32(16))), one);
  } else {
    static_assert(F == CodeFormat::kQ8);
    *i0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    *i1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  }
}

// gs[0 .. m) = the fp32 scales of the flat groups i0 .. i0+m-1 (m <= 16): fp16, or e8 codes looked
// up in the per-tensor table (scalar loads, or one gather for more than 8).
TQ_DQ_INLINE void GroupScales(const PackedMatrix& w, int64_t i0, int m, float* gs) {
  const __mmask16 k = __mmask16((1u << m) - 1);
  if (w.scale_codes != nullptr && m <= 8) {  // a few scalar loads beat a gather's latency
    for (int j = 0; j < m; ++j) gs[j] = w.scale_table[w.scale_codes[i0 + j]];
  } else if (w.scale_codes != nullptr) {
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, w.scale_codes + i0));
    _mm512_store_ps(gs, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, idx, w.scale_table, 4));
  } else {
    _mm512_store_ps(gs, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w.scales + i0)));
  }
}

// buf [count][ld] = rows r0.. of Ŵ, columns k0 .. k0+kc-1 (k0, kc multiples of 32), in bf16.
// kG16: groups of 16 (else a multiple of 32). Per row and 256 columns the (<= 16) group scales
// (and affine minimums) are converted to fp32 once; a unit then broadcasts them from memory (a
// load-port uop: the unit's permutes and the bf16 conversion keep port 5 busy; a per-unit scalar
// fp16 conversion made dequantize + GEMM at 16 tokens 1.25-1.45x slower).
template <CodeFormat F, bool kAffine, bool kG16>
TQ_DQ void DequantBlock(const PackedMatrix& w, int64_t r0, int64_t count, int64_t k0, int64_t kc,
                        uint16_t* buf, int64_t ld) {
  constexpr int64_t kBytes = quant::Traits(F).bytes_per_unit;
  constexpr int64_t kChunk = 256;  // columns per scale conversion: <= 16 groups (g >= 16)
  const int64_t g = w.group_size, groups = w.cols / g;
  alignas(64) float cb16[16] = {};
  if constexpr (!kAffine && F != CodeFormat::kQ8) {
    for (int i = 0; i < quant::Traits(F).levels; ++i) cb16[i] = w.codebook[i];
  }
  const __m512 cbv = _mm512_load_ps(cb16);
  alignas(64) float gs[16], gm[16];
  constexpr int64_t kAhead = 4;  // rows: the block's codes are short runs the prefetcher misses
  const int64_t run = kc / 32 * kBytes, first = k0 / 32 * kBytes;
  for (int64_t r = 0; r < count; ++r) {
    if (r + kAhead < count) {
      const uint8_t* next = w.codes + (r0 + r + kAhead) * w.row_bytes + first;
      for (int64_t b = 0; b < run; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(next + b), _MM_HINT_T0);
    }
    const uint8_t* codes = w.codes + (r0 + r) * w.row_bytes;
    const int64_t row_g = (r0 + r) * groups;
    uint16_t* out = buf + r * ld;
    for (int64_t c0 = k0; c0 < k0 + kc; c0 += kChunk) {
      const int64_t c1 = std::min(k0 + kc, c0 + kChunk), g0 = c0 / g;
      const int ng = int((c1 - 1) / g - g0 + 1);
      GroupScales(w, row_g + g0, ng, gs);
      if constexpr (kAffine) {
        const __mmask16 k = __mmask16((1u << ng) - 1);
        _mm512_store_ps(gm, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w.mins + row_g + g0)));
      }
      // The group of column c is g0 + j; `left` units remain in it (no division per unit).
      // kG16: the unit's codes 0..15 are in group g0 + j, 16..31 in g0 + j + 1.
      int j = 0;
      int64_t left = kG16 ? 1 : (g - c0 % g) / 32;
      for (int64_t c = c0; c < c1; c += 32) {
        __m512i i0, i1;
        Expand<F>(codes + (c / 32) * kBytes, &i0, &i1);
        const __m512 s0 = _mm512_set1_ps(gs[j]);
        const __m512 s1 = kG16 ? _mm512_set1_ps(gs[j + 1]) : s0;
        __m512 v0, v1;
        if constexpr (kAffine) {
          const __m512 m0 = _mm512_set1_ps(gm[j]);
          const __m512 m1 = kG16 ? _mm512_set1_ps(gm[j + 1]) : m0;
          v0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), s0, m0);
          v1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), s1, m1);
        } else if constexpr (F == CodeFormat::kQ8) {
          v0 = _mm512_mul_ps(_mm512_i32gather_ps(i0, w.codebook, 4), s0);
          v1 = _mm512_mul_ps(_mm512_i32gather_ps(i1, w.codebook, 4), s1);
        } else {
          v0 = _mm512_mul_ps(_mm512_permutexvar_ps(i0, cbv), s0);
          v1 = _mm512_mul_ps(_mm512_permutexvar_ps(i1, cbv), s1);
        }
        _mm512_storeu_si512(out + (c - k0), __m512i(_mm512_cvtne2ps_pbh(v1, v0)));
        if constexpr (kG16) {
          j += 2;
        } else if (--left == 0) {
          ++j;
          left = g / 32;
        }
      }
    }
  }
}

using DequantFn = void (*)(const PackedMatrix&, int64_t, int64_t, int64_t, int64_t, uint16_t*,
                           int64_t);

template <CodeFormat F>
DequantFn Pick(const PackedMatrix& w, bool affine) {
  if (w.group_size == 16)
    return affine ? &DequantBlock<F, true, true> : &DequantBlock<F, false, true>;
  if (w.group_size % 32 == 0)
    return affine ? &DequantBlock<F, true, false> : &DequantBlock<F, false, false>;
  return nullptr;
}

DequantFn DequantFor(const PackedMatrix& w) {
  const bool affine = w.method == quant::QuantMethod::kAffine;
  switch (w.format) {
    case CodeFormat::kQ1:
      return Pick<CodeFormat::kQ1>(w, affine);
    case CodeFormat::kQ2:
      return Pick<CodeFormat::kQ2>(w, affine);
    case CodeFormat::kQ3:
      return Pick<CodeFormat::kQ3>(w, affine);
    case CodeFormat::kQ4:
      return Pick<CodeFormat::kQ4>(w, affine);
    case CodeFormat::kQ8:
      return Pick<CodeFormat::kQ8>(w, affine);
    case CodeFormat::kTernary:
      break;
  }
  return nullptr;
}

}  // namespace

bool AmxPackedSupports(const PackedMatrix& w) {
  return amx::Active() && w.cols % amx::kKMultiple == 0 && DequantFor(w) != nullptr;
}

void AmxPackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                     float* y) {
  const DequantFn dq = DequantFor(w);
  TQ_CHECK(AmxPackedSupports(w), "packed matmul amx", "{} [{}, {}] not supported",
           quant::Traits(w.format).name, w.rows, w.cols);
  const amx::Activations a = amx::PrepareActivations(x, n, w.cols, /*split=*/false);
  amx::Gemm(
      a, w.rows,
      [&](int64_t r0, int64_t count, int64_t k0, int64_t kc, uint16_t* buf, int64_t ld) {
        dq(w, r0, count, k0, kc, buf, ld);
      },
      bias, y);
}

#else

bool AmxPackedSupports(const PackedMatrix&) { return false; }
void AmxPackedMatMul(const float*, int64_t, const PackedMatrix&, const float*, float*) {
  Fail("packed matmul amx", "not built for this target");
}

#endif

}  // namespace tq::kernels::cpu
