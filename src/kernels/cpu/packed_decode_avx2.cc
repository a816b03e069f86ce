// AVX2 int8 decode kernel for packed q2/q3/q4/q8 weights (packed_decode.h), for CPUs without
// AVX-512 VNNI; the code expansion and lookups are avx2_codes.h's.
// - Groups of 64+ (the default g128): steps of 64 codes, activations quantized per step in the
//   step's byte order, so a step is expand, look up, two vpmaddubsw + vpmaddwd, one int32 add,
//   one convert, and one vmulps (the row's group scale, held in a register for the group, times
//   the token's pre-broadcast step scale) and one fma. Measured (perf, session 6): the per-32-code
//   scalar factor multiply and broadcast of the first version, and q8's 16-slice lookup (the
//   8-bit LM head: a third of a 4-bit 1B model's bytes), left decode at 0.47x llama.cpp's AVX2
//   build; session 13: step scales written to a buffer per row block (StepScales) took 27% of a
//   1B decode on an AVX2-only EPYC, the in-register group scale doubled q4's speed
//   (bench_packed_kernels BM_DecodeHot q4 n=1: 7.8 -> 16.8 Gweights/s per thread). One token:
//   a group's steps sum cvt(dot) · step scale in their own registers, the group scale multiplies
//   once per group (kGroupSums). q8 with convert's linear codebook reads codes as int8 without a
//   lookup (kLin, avx2_codes.h's LookupLinear: 5 ops per 32 codes instead of 27). Measured on the
//   1B shape, 2 threads: docs/BENCHMARKS.md "AVX2 decode (issue 23, session 13)".
// - Other groups (16, 32·k): units of 32 codes, activations per 32 (natural order), one factor per
//   unit (groups of 16: two, in the low and high four dword lanes).
// Group scales (fp16 or e8 codes into a per-tensor table): steps read them once per group and row
// (GroupScale); units convert them to fp32 once per row block (RowScales). Affine q8 codes (0..255)
// are not taken: vpmaddubsw's int16 pair sums would saturate.
#if defined(__x86_64__)
// GCC 12 warns about the _mm*_undefined_* inside its own intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/cpu/avx2_codes.h"
#include "kernels/cpu/packed_decode.h"

namespace tq::kernels::cpu::isa {
namespace {

using namespace avx2;  // NOLINT: PosToCode, ExpandStep, Lookup, Tables (avx2_codes.h)

TQ_AVX2_INLINE float H2F(uint16_t h) { return _cvtsh_ss(h); }

// One token. Steps (g % 64 == 0): xq int8 [steps, 64] in PosToCode order, xs float [steps
// rounded up to 8] (one scale per step, the pad 0). Units (g = 16, 32): xq int8 [units, 32]
// natural order, xs float [units]. gsum float [groups]: Σx per weight group (affine).
struct TokenView {
  const int8_t* xq;
  const int8_t* xa;  // |xq|, same layout (kSignW)
  const float* xs;
  const float* gsum;
  const float* xsb;  // steps: [steps, 8], xs[s] · codebook scale in all 8 lanes
};

// Codebooks of <= 16 levels take the product as vpmaddubsw(|x|, w with x's sign): |x| is made
// once per token, so a half step costs one vpshufb (shared by the tokens) and one vpsign per
// token, one op fewer than |w| · (x with w's sign), which needs vpabsb per row as well. The
// products and their pair-sum bound (2 · 127 · 127) are the same. q8's half-table lookup yields
// |w| and the sign directly, so it keeps that form.
template <CodeFormat F>
constexpr bool kSignW = F != CodeFormat::kQ8;

// Floats of one token's prepared data (each part 32-byte aligned).
int64_t TokenFloats(int64_t cols, int64_t groups) {
  const int64_t units = cols / 32;
  return 2 * units * 8 + (units + 7) / 8 * 8 + (groups + 7) / 8 * 8 + cols / 64 * 8;
}

template <CodeFormat F>
TQ_AVX2 void PrepareToken(const float* x, int64_t cols, int64_t g, bool steps, float cb_scale,
                          float* base, TokenView* tv) {
  const int64_t units = cols / 32, groups = cols / g;
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* xa = reinterpret_cast<int8_t*>(base + units * 8);
  float* xs = base + 2 * units * 8;
  float* gsum = xs + (units + 7) / 8 * 8;
  float* xsb = gsum + (groups + 7) / 8 * 8;
  if (steps) {
    QuantizeSteps<F>(x, cols, xq, xs, nullptr);
    for (int64_t s = 0; s < cols / 64; ++s)
      _mm256_store_ps(xsb + s * 8, _mm256_set1_ps(xs[s] * cb_scale));
  } else {
    for (int64_t u = 0; u < units; ++u) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[u * 32 + j]));
      xs[u] = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int j = 0; j < 32; ++j) xq[u * 32 + j] = int8_t(std::lrintf(x[u * 32 + j] * inv));
    }
  }
  for (int64_t u = 0; u < units; ++u)
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(xa + u * 32),
        _mm256_abs_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(xq + u * 32))));
  for (int64_t j = 0; j < groups; ++j) {
    float sum = 0.0f;
    for (int64_t c = j * g; c < (j + 1) * g; ++c) sum += x[c];
    gsum[j] = sum;
  }
  *tv = {xq, xa, xs, gsum, xsb};
}

// The 32 codes of one unit in natural order.
template <CodeFormat F>
TQ_AVX2_INLINE __m256i UnitCodes(const uint8_t* p) {
  if constexpr (F == CodeFormat::kQ4) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i z = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(z, _mm256_set1_epi8(0x0F));
  } else {
    return ExpandUnit<F>(p);
  }
}

// Σ over 32 byte pairs of w · x as |x| · (w with x's sign), 8 int32 lanes (kSignW).
TQ_AVX2_INLINE __m256i DotSignW(__m256i w, __m256i xabs, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(xabs, _mm256_sign_epi8(w, x)),
                           _mm256_set1_epi16(1));
}

// ws [R, groups] = the fp32 group scales of rows r0 .. r0+R-1, times `mul`.
template <int R>
TQ_AVX2 void RowScales(const PackedMatrix& w, int64_t r0, float mul, float* ws) {
  const int64_t n = R * (w.cols / w.group_size), i0 = r0 * (w.cols / w.group_size);
  const __m256 m = _mm256_set1_ps(mul);
  int64_t i = 0;
  if (w.scale_codes != nullptr) {  // e8: 8 codes → one gather from the table
    const uint8_t* q = w.scale_codes + i0;
    for (; i + 8 <= n; i += 8) {
      const __m256i idx =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
      _mm256_storeu_ps(ws + i, _mm256_mul_ps(_mm256_i32gather_ps(w.scale_table, idx, 4), m));
    }
    for (; i < n; ++i) ws[i] = w.scale_table[q[i]] * mul;
    return;
  }
  const uint16_t* h = w.scales + i0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        ws + i, _mm256_mul_ps(
                    _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))), m));
  for (; i < n; ++i) ws[i] = _cvtsh_ss(h[i]) * mul;
}

// Prefetch of the next R-row block (see packed_decode_avx512.cc): each step of `bytes` bytes per
// row prefetches its share of the block's R·row_bytes bytes.
template <int kBytes>
TQ_AVX2_INLINE void PrefetchShare(const uint8_t* pf, int64_t i) {
  if (pf == nullptr) return;
  const char* a = reinterpret_cast<const char*>(pf) + i * kBytes;
  for (int k = 0; k < kBytes; k += 64) _mm_prefetch(a + k, _MM_HINT_T1);
  if constexpr (kBytes % 64 != 0) _mm_prefetch(a + kBytes - 1, _MM_HINT_T1);
}

// y[t · ystride + r] = v (the row's float dot product) + the affine Σ_g min_g · Σx_g.
template <bool kAffine, int R, int N>
TQ_AVX2_INLINE void Finish(const PackedMatrix& w, int64_t r0, const TokenView* tv,
                           const __m256 (*acc)[N], float* y, int64_t ystride) {
  const int64_t groups = w.cols / w.group_size;
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < N; ++t) {
      float v = HorizontalSum(acc[r][t]);
      if constexpr (kAffine) {
        const uint16_t* mn = w.mins + (r0 + r) * groups;
        for (int64_t j = 0; j < groups; ++j) v += H2F(mn[j]) * tv[t].gsum[j];
      }
      y[t * ystride + r] = v;
    }
  }
}

// The fp32 scale of flat group i (row · groups + group) in all 8 lanes: e8 codes look up the
// per-tensor table (one vbroadcastss from it), fp16 is converted.
template <bool kE8>
TQ_AVX2_INLINE __m256 GroupScale(const PackedMatrix& w, int64_t i) {
  if constexpr (kE8) {
    return _mm256_broadcast_ss(w.scale_table + w.scale_codes[i]);
  } else {
    return _mm256_set1_ps(_cvtsh_ss(w.scales[i]));
  }
}

// Groups of 64+: rows r0 .. r0+R-1 × tokens tv[0 .. N-1], steps of 64 codes. A step's fp32 factor
// is its row's group scale (read once per group, kept in a register) times the token's
// pre-broadcast step scale (TokenView::xsb, which carries the codebook scale): one vmulps with a
// memory operand per row and step. The first version wrote step scales for the block to a buffer
// first (StepScales: scalar table lookups, spread over the steps, reloaded 8 at a time): 27% of a
// 1B decode's samples on an AVX2-only EPYC (perf, session 13).
// One token (N = 1): a group's steps accumulate Σ cvt(dot) · step scale in their own registers
// and the group scale multiplies that once per group (one fma per step instead of vmulps + fma);
// with two tokens the 2·R extra accumulators would not fit in the 16 ymm registers.
template <int N>
constexpr bool kGroupSums = N == 1;

template <CodeFormat F, bool kAffine, bool kLin, bool kE8, int R, int N>
TQ_AVX2 void StepRows(const Tables& t, const PackedMatrix& w, int64_t r0, const TokenView* tv,
                      float* y, int64_t ystride, const uint8_t* pf) {
  const int64_t groups = w.cols / w.group_size, spg = w.group_size / 64;
  const uint8_t* p[R];
  __m256 acc[R][N];
  for (int r = 0; r < R; ++r) {
    p[r] = w.codes + (r0 + r) * w.row_bytes;
    for (int k = 0; k < N; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  if (pf != nullptr) PrefetchScales(w, r0 + R, R);
  for (int64_t j = 0; j < groups; ++j) {
    __m256 ws[R], ag[R][N];
    for (int r = 0; r < R; ++r) {
      if constexpr (kGroupSums<N>) {
        for (int k = 0; k < N; ++k) ag[r][k] = _mm256_setzero_ps();
      } else {
        ws[r] = GroupScale<kE8>(w, (r0 + r) * groups + j);
      }
    }
    for (int64_t s = j * spg; s < (j + 1) * spg; ++s) {
      PrefetchShare<R * kStepBytes<F>>(pf, s);
      for (int r = 0; r < R; ++r) {
        __m256i ca, cb;
        ExpandStep<F>(p[r] + s * kStepBytes<F>, &ca, &cb);
        Looked la, lb;
        __m256i wa, wb;  // kSignW: signed centroids
        if constexpr (!kAffine && kSignW<F>) {
          wa = _mm256_shuffle_epi8(t.t16, ca);
          wb = _mm256_shuffle_epi8(t.t16, cb);
        } else if constexpr (kLin) {
          la = LookupLinear(ca);
          lb = LookupLinear(cb);
        } else if constexpr (!kAffine) {
          la = Lookup<F>(ca, t);
          lb = Lookup<F>(cb, t);
        }
        for (int k = 0; k < N; ++k) {
          const __m256i* xq = reinterpret_cast<const __m256i*>(tv[k].xq + s * 64);
          const __m256i xa = _mm256_load_si256(xq), xb = _mm256_load_si256(xq + 1);
          __m256i d;
          if constexpr (kAffine) {
            d = _mm256_add_epi32(DotUnsigned(ca, xa), DotUnsigned(cb, xb));
          } else if constexpr (kSignW<F>) {
            const __m256i* xab = reinterpret_cast<const __m256i*>(tv[k].xa + s * 64);
            d = _mm256_add_epi32(DotSignW(wa, _mm256_load_si256(xab), xa),
                                 DotSignW(wb, _mm256_load_si256(xab + 1), xb));
          } else {
            d = _mm256_add_epi32(DotSigned(la, xa), DotSigned(lb, xb));
          }
          const __m256 xs = _mm256_load_ps(tv[k].xsb + s * 8);
          if constexpr (kGroupSums<N>) {
            ag[r][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), xs, ag[r][k]);
          } else {
            acc[r][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(ws[r], xs), acc[r][k]);
          }
        }
      }
    }
    if constexpr (kGroupSums<N>) {
      for (int r = 0; r < R; ++r) {
        const __m256 g = GroupScale<kE8>(w, (r0 + r) * groups + j);
        for (int k = 0; k < N; ++k) acc[r][k] = _mm256_fmadd_ps(ag[r][k], g, acc[r][k]);
      }
    }
  }
  Finish<kAffine, R, N>(w, r0, tv, acc, y, ystride);
}

// Groups of 16 or 32·k: rows r0 .. r0+R-1 × tokens tv[0 .. N-1], units of 32 codes. ws [R,
// groups]: the group scales (· codebook scale). kG16: two groups per unit.
template <CodeFormat F, bool kAffine, bool kLin, bool kG16, int R, int N>
TQ_AVX2 void UnitRows(const Tables& t, const PackedMatrix& w, int64_t r0, const TokenView* tv,
                      float* y, int64_t ystride, const uint8_t* pf, const float* ws) {
  const int64_t g = w.group_size, groups = w.cols / g, units = w.cols / 32;
  const uint8_t* p[R];
  const float* sc[R];
  __m256 acc[R][N];
  for (int r = 0; r < R; ++r) {
    p[r] = w.codes + (r0 + r) * w.row_bytes;
    sc[r] = ws + r * groups;
    for (int k = 0; k < N; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  if (pf != nullptr) PrefetchScales(w, r0 + R, R);
  for (int64_t u = 0; u < units; ++u) {
    PrefetchShare<R * kUnitBytes<F>>(pf, u);
    const int64_t gi = (u * 32) / g;
    for (int r = 0; r < R; ++r) {
      const __m256i code = UnitCodes<F>(p[r] + u * kUnitBytes<F>);
      Looked l;
      __m256i wv;  // kSignW: signed centroids
      if constexpr (!kAffine && kSignW<F>) {
        wv = _mm256_shuffle_epi8(t.t16, code);
      } else if constexpr (kLin) {
        l = LookupLinear(code);
      } else if constexpr (!kAffine) {
        l = Lookup<F>(code, t);
      }
      __m256 wsv;  // kG16: group 2u in the low four lanes (codes 0..15), 2u + 1 in the high
      if constexpr (kG16) {
        wsv = _mm256_blend_ps(_mm256_set1_ps(sc[r][2 * u]), _mm256_set1_ps(sc[r][2 * u + 1]), 0xF0);
      } else {
        wsv = _mm256_set1_ps(sc[r][gi]);
      }
      for (int k = 0; k < N; ++k) {
        const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(tv[k].xq + u * 32));
        __m256i d;
        if constexpr (kAffine) {
          d = DotUnsigned(code, xv);
        } else if constexpr (kSignW<F>) {
          d = DotSignW(wv, _mm256_load_si256(reinterpret_cast<const __m256i*>(tv[k].xa + u * 32)),
                       xv);
        } else {
          d = DotSigned(l, xv);
        }
        acc[r][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d),
                                    _mm256_mul_ps(_mm256_set1_ps(tv[k].xs[u]), wsv), acc[r][k]);
      }
    }
  }
  Finish<kAffine, R, N>(w, r0, tv, acc, y, ystride);
}

// kGps: 0 = steps (groups of 64·k), 1 = units within one group (32·k), 2 = units of two
// groups (16).
template <CodeFormat F, bool kAffine, bool kLin, int kGps, int R, int N>
TQ_AVX2_INLINE void RowsPass(const Tables& t, const PackedMatrix& w, int64_t r0,
                             const TokenView* tv, float* y, int64_t ystride, const uint8_t* pf,
                             const float* ws) {
  if constexpr (kGps == 0) {
    if (w.e8_scales()) return StepRows<F, kAffine, kLin, true, R, N>(t, w, r0, tv, y, ystride, pf);
    StepRows<F, kAffine, kLin, false, R, N>(t, w, r0, tv, y, ystride, pf);
  } else {
    UnitRows<F, kAffine, kLin, kGps == 2, R, N>(t, w, r0, tv, y, ystride, pf, ws);
  }
}

// Rows r0 .. r0+R-1 for all n tokens, 1 or 2 tokens per pass (R·N ymm accumulators stay in
// registers); the first pass prefetches the next block, the others find this one in L1/L2.
template <CodeFormat F, bool kAffine, bool kLin, int kGps, int R>
TQ_AVX2 void RowsAllTokens(const Tables& t, const PackedMatrix& w, int64_t r0, const TokenView* tv,
                           int64_t n, float* y, int64_t ystride, const uint8_t* pf) {
  const float* ws = nullptr;
  if constexpr (kGps != 0) {
    thread_local AlignedBuffer<float> buf;  // [R, groups] group scales
    const int64_t need = R * (w.cols / w.group_size);
    if (buf.size() < size_t(need)) buf.resize(size_t(need));
    RowScales<R>(w, r0, t.cb_scale, buf.data());
    ws = buf.data();
  }
  for (int64_t t0 = 0; t0 < n; t0 += 2) {
    const uint8_t* f = t0 == 0 ? pf : nullptr;
    float* yp = y + t0 * ystride + r0;
    if (n - t0 == 1) {
      RowsPass<F, kAffine, kLin, kGps, R, 1>(t, w, r0, tv + t0, yp, ystride, f, ws);
    } else {
      RowsPass<F, kAffine, kLin, kGps, R, 2>(t, w, r0, tv + t0, yp, ystride, f, ws);
    }
  }
}

template <CodeFormat F, bool kAffine, bool kLin, int kGps>
void RunFormat(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
               const Tables& t) {
  const int64_t cols = w.cols, rows = w.rows, g = w.group_size;
  const int64_t per_token = TokenFloats(cols, cols / g);
  thread_local AlignedBuffer<float> buf;
  if (buf.size() < size_t(per_token * n)) buf.resize(size_t(per_token * n));
  TokenView tv[kFastDecodeMaxTokens];
  for (int64_t i = 0; i < n; ++i)
    PrepareToken<F>(x + i * cols, cols, g, kGps == 0, t.cb_scale, buf.data() + i * per_token,
                    &tv[i]);
  auto body = [&](int64_t b, int64_t e) {
    int64_t r = b;
    for (; r + 4 <= e; r += 4) {
      const uint8_t* pf = r + 8 <= rows ? w.codes + (r + 4) * w.row_bytes : nullptr;
      RowsAllTokens<F, kAffine, kLin, kGps, 4>(t, w, r, tv, n, y, rows, pf);
    }
    for (; r < e; ++r) RowsAllTokens<F, kAffine, kLin, kGps, 1>(t, w, r, tv, n, y, rows, nullptr);
    if (bias != nullptr)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = b; k < e; ++k) y[i * rows + k] += bias[k];
  };
  ForRowBlocks(rows, cols, body);
}

// kLin: q8 with a linear codebook (Tables::q8_linear), its codes read as int8 without a lookup.
template <CodeFormat F, bool kAffine, bool kLin>
void DispatchGroups(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
                    const Tables& t) {
  const int64_t g = w.group_size;
  if (g % 64 == 0) return RunFormat<F, kAffine, kLin, 0>(x, n, w, bias, y, t);
  g == 16 ? RunFormat<F, kAffine, kLin, 2>(x, n, w, bias, y, t)
          : RunFormat<F, kAffine, kLin, 1>(x, n, w, bias, y, t);
}

template <CodeFormat F>
void Dispatch(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
              const Tables& t) {
  if (w.method == QuantMethod::kAffine) return DispatchGroups<F, true, false>(x, n, w, bias, y, t);
  if constexpr (F == CodeFormat::kQ8) {
    if (t.q8_linear) return DispatchGroups<F, false, true>(x, n, w, bias, y, t);
  }
  DispatchGroups<F, false, false>(x, n, w, bias, y, t);
}

}  // namespace

bool Avx2Supports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  // Affine q8 codes (0..255) times int8 would saturate vpmaddubsw's int16 pair sums.
  const bool q8_ok = f == CodeFormat::kQ8 && w.method != QuantMethod::kAffine;
  const int64_t g = w.group_size;
  return (f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4 || q8_ok) &&
         (g == 16 || g % 32 == 0) && w.cols % 32 == 0;
}

TQ_AVX2 void Avx2Decode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                        float* y) {
  Tables t;
  BuildTables(w, &t);
  switch (w.format) {
    case CodeFormat::kQ2:
      return Dispatch<CodeFormat::kQ2>(x, n, w, bias, y, t);
    case CodeFormat::kQ3:
      return Dispatch<CodeFormat::kQ3>(x, n, w, bias, y, t);
    case CodeFormat::kQ4:
      return Dispatch<CodeFormat::kQ4>(x, n, w, bias, y, t);
    case CodeFormat::kQ8:
      return Dispatch<CodeFormat::kQ8>(x, n, w, bias, y, t);
    default:
      break;
  }
}

}  // namespace tq::kernels::cpu::isa

#else  // not x86-64

#include "kernels/cpu/packed_decode.h"

namespace tq::kernels::cpu::isa {
bool Avx2Supports(const PackedMatrix&) { return false; }
void Avx2Decode(const float*, int64_t, const PackedMatrix&, const float*, float*) {}
}  // namespace tq::kernels::cpu::isa

#endif
