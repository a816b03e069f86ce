// AVX-512 VNNI int8 decode kernel for packed q2/q3/q4/q8 weights (packed_decode.h).
//
// A step covers 64 codes = two 32-code units (u0, u1) of a row. The codes of a step are expanded
// to one zmm of code indices in a format-specific byte order; each token's int8 activations are
// stored once per call in that same order, so a step is: expand, look up (vpshufb / vpermi2b),
// vpdpbusd, convert, one fma with the per-lane scale. vpdpbusd multiplies unsigned by signed
// bytes, so the looked-up weights are stored +128 (u8) and the excess 128·Σx is pre-loaded,
// negated, into the accumulator (`bias` lanes); affine codes are already unsigned.
// Group scales are fp16 or e8 (a u8 code per group into a per-tensor fp32 table, half the scale
// bytes): 16 groups of a row become one zmm of fp32 at a time (vcvtph2ps, or vpmovzxbd +
// vgatherdps), except e8 with groups of 16/32, whose steps broadcast their scales from the table.
#if defined(__x86_64__)
// GCC 12 warns about the _mm*_undefined_* inside its own intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/avx512_codes.h"
#include "kernels/cpu/packed_decode.h"

namespace tq::kernels::cpu::isa {
namespace {

using namespace avx512;  // NOLINT: PosToCode, Expand, Lookup, Tables (avx512_codes.h)

// The dword lanes (of 16) whose codes are in group k (0 .. 64/g - 1) of a step, g = 16 or 32.
template <CodeFormat F>
inline __mmask16 GroupLanes(int64_t g, int k) {
  unsigned m = 0;
  for (int i = 0; i < 16; ++i)
    if (PosToCode<F>(4 * i) / g == k) m |= 1u << i;
  return __mmask16(m);
}

// One token's activations in kernel order: xq int8 [steps, 64], bias int32 [steps, 16]
// (-128 · Σ of each dword's 4 bytes for the codebook method, else 0), xs float [steps, 16] (the
// activation scale of each dword's unit), gsum float [groups] (Σx per weight group, affine),
// xss float [steps] (seg > 0: one activation scale per segment of seg steps, the same in all its
// lanes and steps; bias then holds each segment's sum in its first step and 0 in the others).
struct TokenView {
  const int8_t* xq;
  const int32_t* bias;
  const float* xs;
  const float* gsum;
  const float* xss;
};

// Bytes of one token's prepared data (each part 64-byte aligned).
int64_t TokenFloats(int64_t steps, int64_t groups) {
  return steps * 16 /*xq*/ + steps * 16 /*bias*/ + steps * 16 /*xs*/ + (groups + 15) / 16 * 16 +
         (steps + 15) / 16 * 16 /*xss*/;
}

// Steps per activation segment for groups of g >= 64 columns (a multiple of 64): 2 where a group
// spans an even number of steps (one int8 scale per 128 values, so a segment's two vpdpbusd
// chain in int32 and its float factor is one scalar: one convert and one fma per 2 steps), else 1.
inline int SegmentSteps(int64_t g) { return (g / 64) % 2 == 0 ? 2 : 1; }

// seg > 0: quantize per segment of seg steps (groups of 64+ columns, SegmentSteps) instead of per
// 32 values, so the float factor of a segment is a scalar (see RowsSegmented).
template <CodeFormat F>
void PrepareToken(const float* x, int64_t cols, int64_t g, bool codebook, int seg, float* base,
                  TokenView* tv) {
  const int64_t units = cols / 32, steps = (units + 1) / 2, groups = cols / g;
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* bias = reinterpret_cast<int32_t*>(base + steps * 16);
  float* xs = base + steps * 32;
  float* gsum = base + steps * 48;
  float* xss = gsum + (groups + 15) / 16 * 16;
  const int unit_span = seg > 0 ? 2 * seg : 1;  // units sharing one activation scale
  for (int64_t u0 = 0; u0 < units; u0 += unit_span) {
    const int64_t u1 = std::min(units, u0 + unit_span);
    float amax = 0.0f;
    for (int64_t c = u0 * 32; c < u1 * 32; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t unit = u0; unit < u1; ++unit) {
      const int64_t s = unit / 2, half = unit % 2;
      int8_t* q = xq + s * 64;
      for (int p = 0; p < 64; ++p) {
        const int off = PosToCode<F>(p);
        if ((off >> 5) != half) continue;
        q[p] = int8_t(std::lrintf(x[s * 64 + off] * inv));
      }
      for (int i = 0; i < 16; ++i)
        if ((PosToCode<F>(4 * i) >> 5) == half) xs[s * 16 + i] = scale;
      if (half == 0) xss[s] = scale;
    }
  }
  if (units % 2 == 1) {  // the last step's missing u1: zero activations (its codes are padding)
    const int64_t s = units / 2;
    for (int p = 0; p < 64; ++p)
      if ((PosToCode<F>(p) >> 5) == 1) xq[s * 64 + p] = 0;
    for (int i = 0; i < 16; ++i)
      if ((PosToCode<F>(4 * i) >> 5) == 1) xs[s * 16 + i] = 0.0f;
  }
  for (int64_t s = 0; s < steps; ++s) {
    const int8_t* q = xq + s * 64;
    for (int i = 0; i < 16; ++i) {
      const int sum = q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3];
      bias[s * 16 + i] = codebook ? -128 * sum : 0;
    }
  }
  if (seg > 1) {  // a segment's bias in its first step (the chained vpdpbusd add it once)
    for (int64_t s = 0; s < steps; s += seg)
      for (int64_t k = s + 1; k < std::min(steps, s + seg); ++k)
        for (int i = 0; i < 16; ++i) {
          bias[s * 16 + i] += bias[k * 16 + i];
          bias[k * 16 + i] = 0;
        }
  }
  for (int64_t j = 0; j < groups; ++j) {
    float sum = 0.0f;
    for (int64_t c = j * g; c < (j + 1) * g; ++c) sum += x[c];
    gsum[j] = sum;
  }
  *tv = {xq, bias, xs, gsum, xss};
}

// Per-lane group (0 .. 64/g - 1 within a step) of each dword lane for g = 16 or 32: a dword's 4
// codes are consecutive and 4-aligned in every format order (PosToCode), so one group holds them.
template <CodeFormat F>
TQ_AVX512_INLINE __m512i LaneGroups(int64_t g) {
  alignas(64) int32_t v[16];
  for (int i = 0; i < 16; ++i) v[i] = PosToCode<F>(4 * i) / int(g);
  return _mm512_load_si512(v);
}

struct RowCtx {
  const PackedMatrix* w;
  const Tables* t;
  int64_t units, full_steps;  // full_steps: steps with both units
  bool odd;                   // a last step with u0 only
};

// A step's u8 weights: q2 / q4 codebooks by vpermb on the unmasked codes (LookupRaw), the rest
// by Lookup of the clean indices.
template <CodeFormat F, bool kAffine, bool kLinear, bool kTail>
TQ_AVX512_INLINE __m512i StepWeights(const uint8_t* p, const Tables& t) {
#ifndef TQ_NO_VPERMB
  if constexpr (!kAffine && (F == CodeFormat::kQ2 || F == CodeFormat::kQ4)) {
#else
  if constexpr (false) {
#endif
    return LookupRaw<F>(Expand<F, kTail, false>(p), t);
  } else {
    return Lookup<F, kAffine, kLinear>(Expand<F, kTail>(p), t);
  }
}

// One step of R rows × N tokens: each row's codes are expanded and looked up once and reused for
// the N tokens (the int8 activations, bias lanes and scales of a token are loaded per use).
template <CodeFormat F, bool kAffine, bool kLinear, int R, int N, bool kTail>
TQ_AVX512_INLINE void Step(const RowCtx& c, const TokenView* tv, int64_t s, const uint8_t* const* p,
                           const __m512* ws, __m512 (*acc)[N]) {
  for (int r = 0; r < R; ++r) {
    const __m512i wv = StepWeights<F, kAffine, kLinear, kTail>(p[r] + s * kStepBytes<F>, *c.t);
    for (int t = 0; t < N; ++t) {
      const __m512i d = _mm512_dpbusd_epi32(_mm512_load_si512(tv[t].bias + s * 16), wv,
                                            _mm512_load_si512(tv[t].xq + s * 64));
      acc[r][t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(d),
                          _mm512_mul_ps(_mm512_load_ps(tv[t].xs + s * 16), ws[r]), acc[r][t]);
    }
  }
}

// How far ahead the codes are prefetched: one 4-row block was 4 KiB at 2,048 q4 columns, too
// short to cover a 2-core Zen 4's memory latency (bench_packed_kernels BM_Decode/2/2/1, 1 GiB of
// [8192, 2048] q4 g128 streamed, 1 thread: 67 ms at 4 KiB, 50-60 at 8 KiB, 48-51 at 16 KiB;
// q8's 8 KiB blocks unchanged; end to end 8 KiB was best by a hair: docs/BENCHMARKS.md).
inline constexpr int64_t kPrefetchAheadBytes = 8192;

// Software prefetch of a later R-row block while this one runs: the hardware prefetchers stop
// at 4 KiB pages and restart on each block, which left one core at half its read bandwidth.
// Rows are contiguous (row_bytes apart), so block b+1 is the R·row_bytes bytes after block b;
// each step prefetches its share (R·step bytes), the scales all at once.
template <CodeFormat F, int R>
TQ_AVX512_INLINE void PrefetchStep(const uint8_t* pf, int64_t s) {
  if (pf == nullptr) return;
  constexpr int kBytes = R * kStepBytes<F>;
  const char* a = reinterpret_cast<const char*>(pf) + s * kBytes;
  for (int k = 0; k < kBytes; k += 64) _mm_prefetch(a + k, _MM_HINT_T1);
  if constexpr (kBytes % 64 != 0) _mm_prefetch(a + kBytes - 1, _MM_HINT_T1);
}

// y[t · ystride + r] = row r0 + r of Ŵ · token t (without bias), r < R, t < N. Group size 16 or
// 32 (kGps = 4 or 2 groups per step, each dword lane has its own scale) or a multiple of
// 64 (kGps = 0: a group spans whole steps, activations quantized per kSeg steps, SegmentSteps;
// the row has no odd unit). Scales are converted 16 groups at a time (LoadScales).
// pf: the next block to prefetch, or null.
template <CodeFormat F, bool kAffine, bool kLinear, int kGps, int kSeg, int R, int N>
TQ_AVX512 void Rows(const RowCtx& c, int64_t r0, const TokenView* tv, float* y, int64_t ystride,
                    const uint8_t* pf) {
  const PackedMatrix& w = *c.w;
  const int64_t groups = w.cols / w.group_size;
  const int64_t steps = c.full_steps + (c.odd ? 1 : 0);
  const uint8_t* p[R];
  int64_t si[R];  // flat index of the row's first group scale
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r) {
    p[r] = w.codes + (r0 + r) * w.row_bytes;
    si[r] = (r0 + r) * groups;
    for (int t = 0; t < N; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  if (pf != nullptr) {
    const char* ps = static_cast<const char*>(w.ScaleStorage(si[0] + R * groups));
    const int64_t bytes = R * groups * w.ScaleStorageBytes();
    for (int64_t k = 0; k < bytes; k += 64) _mm_prefetch(ps + k, _MM_HINT_T0);
    if (kAffine) {
      ps = reinterpret_cast<const char*>(w.mins + (r0 + R) * groups);
      for (int64_t k = 0; k < R * groups * 2; k += 64) _mm_prefetch(ps + k, _MM_HINT_T0);
    }
  }
  if constexpr (kGps == 0) {
    // Blocks of 16 steps: the steps' group scales (step s is in group s / spg) times each
    // token's per-step activation scales, one vector multiply per row and token; a step then
    // costs expand, lookup, vpdpbusd, convert and one fma with an embedded broadcast (session 1:
    // per-lane scales, one more multiply and load per row and step; 20-33% slower).
    const int64_t spg = w.group_size / 64;  // steps per group
    alignas(64) float f[R][N][16];
    alignas(64) int32_t gi[16];
    for (int64_t s0 = 0; s0 < steps; s0 += 16) {
      const int sn = int(std::min<int64_t>(16, steps - s0));
      const __mmask16 ms = __mmask16((1u << sn) - 1);
      const int64_t g0 = s0 / spg;
      const int gn = int(std::min<int64_t>(16, groups - g0));
      const __mmask16 mg = __mmask16((1u << gn) - 1);
      for (int i = 0; i < 16; ++i) gi[i] = int32_t(std::min<int64_t>((s0 + i) / spg - g0, gn - 1));
      const __m512i gidx = _mm512_load_si512(gi);
      __m512 xsv[N];
      for (int t = 0; t < N; ++t) xsv[t] = _mm512_maskz_loadu_ps(ms, tv[t].xss + s0);
      for (int r = 0; r < R; ++r) {
        __m512 ws = LoadScales(w, si[r] + g0, mg);
        if (spg > 1) ws = _mm512_permutexvar_ps(gidx, ws);
        for (int t = 0; t < N; ++t) _mm512_store_ps(f[r][t], _mm512_mul_ps(ws, xsv[t]));
      }
      // Segments of kSeg steps (sn and steps are multiples of kSeg: 16 / kSeg and g / 64 /
      // kSeg are whole): the steps' vpdpbusd chain in int32 from the segment's bias, then one
      // convert and one fma with the segment's scalar factor f (the same at each of its steps).
      for (int i = 0; i < sn; i += kSeg) {
        const int64_t s = s0 + i;
        for (int l = 0; l < kSeg; ++l) PrefetchStep<F, R>(pf, s + l);
        for (int r = 0; r < R; ++r) {
          __m512i wv[kSeg];
          for (int l = 0; l < kSeg; ++l)
            wv[l] = StepWeights<F, kAffine, kLinear, false>(p[r] + (s + l) * kStepBytes<F>, *c.t);
          for (int t = 0; t < N; ++t) {
            __m512i d = _mm512_load_si512(tv[t].bias + s * 16);
            for (int l = 0; l < kSeg; ++l)
              d = _mm512_dpbusd_epi32(d, wv[l], _mm512_load_si512(tv[t].xq + (s + l) * 64));
            acc[r][t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_set1_ps(f[r][t][i]), acc[r][t]);
          }
        }
      }
    }
  } else {
    if (w.scale_codes != nullptr) {
      // e8: the step's 2 (g32) or 4 (g16) table entries broadcast straight from the table (load
      // uops) and blended by lane group — cheaper than a gather per 16 groups plus a vpermps
      // per step (port 5 is the kernel's bottleneck). Groups past the row's end (the u1 half
      // of an odd row's last step) take the step's first scale: their activations are 0.
      const __mmask16 m1 = GroupLanes<F>(64 / kGps, 1);
      const __mmask16 m2 = kGps == 4 ? GroupLanes<F>(16, 2) : 0,
                      m3 = kGps == 4 ? GroupLanes<F>(16, 3) : 0;
      const float* tab = w.scale_table;
      __m512 ws[R];
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t j0 = kGps * s;
        const int64_t j1 = j0 + 1 < groups ? j0 + 1 : j0, j2 = j0 + 2 < groups ? j0 + 2 : j0,
                      j3 = j0 + 3 < groups ? j0 + 3 : j0;
        for (int r = 0; r < R; ++r) {
          const uint8_t* q = w.scale_codes + si[r];
          ws[r] = _mm512_mask_blend_ps(m1, _mm512_set1_ps(tab[q[j0]]), _mm512_set1_ps(tab[q[j1]]));
          if constexpr (kGps == 4) {
            ws[r] = _mm512_mask_blend_ps(m2, ws[r], _mm512_set1_ps(tab[q[j2]]));
            ws[r] = _mm512_mask_blend_ps(m3, ws[r], _mm512_set1_ps(tab[q[j3]]));
          }
        }
        PrefetchStep<F, R>(pf, s);
        if (s < c.full_steps) {
          Step<F, kAffine, kLinear, R, N, false>(c, tv, s, p, ws, acc);
        } else {
          Step<F, kAffine, kLinear, R, N, true>(c, tv, s, p, ws, acc);
        }
      }
    } else {
      // fp16: blocks of 16 groups = 16 / kGps steps; lane i of step j takes group kGps·j +
      // lane_g[i] of the block (a vpermps of the block's scales). Lanes past the row's end get 0
      // (their codes meet zero activations).
      const __m512i lane_g = LaneGroups<F>(w.group_size);
      int64_t s = 0;
      for (int64_t g0 = 0; g0 < groups; g0 += 16) {
        const int gn = int(std::min<int64_t>(16, groups - g0));
        const __mmask16 m = __mmask16((1u << gn) - 1);
        __m512 gv[R], ws[R];
        for (int r = 0; r < R; ++r) gv[r] = LoadScales(w, si[r] + g0, m);
        for (int j = 0; j < gn; j += kGps, ++s) {
          const __m512i idx = _mm512_add_epi32(lane_g, _mm512_set1_epi32(j));
          for (int r = 0; r < R; ++r) ws[r] = _mm512_permutexvar_ps(idx, gv[r]);
          PrefetchStep<F, R>(pf, s);
          if (s < c.full_steps) {
            Step<F, kAffine, kLinear, R, N, false>(c, tv, s, p, ws, acc);
          } else {
            Step<F, kAffine, kLinear, R, N, true>(c, tv, s, p, ws, acc);
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < N; ++t) {
      float v = _mm512_reduce_add_ps(acc[r][t]) * c.t->cb_scale;
      if constexpr (kAffine) {  // + Σ_g min_g · Σx_g
        const uint16_t* mn = w.mins + (r0 + r) * groups;
        __m512 m = _mm512_setzero_ps();
        int64_t j = 0;
        for (; j + 16 <= groups; j += 16)
          m = _mm512_fmadd_ps(
              _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(mn + j))),
              _mm512_loadu_ps(tv[t].gsum + j), m);
        v += _mm512_reduce_add_ps(m);
        for (; j < groups; ++j) v += H2F(mn[j]) * tv[t].gsum[j];
      }
      y[t * ystride + r] = v;
    }
  }
}

// Rows r0 .. r0+R-1 for all n tokens, in passes of up to kTokensPerPass tokens (R·N zmm
// accumulators); the first pass prefetches the next block, the others find it in L1/L2.
inline constexpr int kTokensPerPass = 4;

template <CodeFormat F, bool kAffine, bool kLinear, int kGps, int kSeg, int R>
TQ_AVX512 void RowsAllTokens(const RowCtx& c, int64_t r0, const TokenView* tv, int64_t n, float* y,
                             int64_t ystride, const uint8_t* pf) {
  for (int64_t t0 = 0; t0 < n; t0 += kTokensPerPass) {
    const TokenView* tp = tv + t0;
    float* yp = y + t0 * ystride + r0;
    const uint8_t* f = t0 == 0 ? pf : nullptr;
    switch (std::min<int64_t>(kTokensPerPass, n - t0)) {
      case 1:
        Rows<F, kAffine, kLinear, kGps, kSeg, R, 1>(c, r0, tp, yp, ystride, f);
        break;
      case 2:
        Rows<F, kAffine, kLinear, kGps, kSeg, R, 2>(c, r0, tp, yp, ystride, f);
        break;
      case 3:
        Rows<F, kAffine, kLinear, kGps, kSeg, R, 3>(c, r0, tp, yp, ystride, f);
        break;
      default:
        Rows<F, kAffine, kLinear, kGps, kSeg, R, 4>(c, r0, tp, yp, ystride, f);
        break;
    }
  }
}

template <CodeFormat F, bool kAffine, int kGps, bool kLinear = false, int kSeg = 0>
void RunFormat(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
               const Tables& t) {
  const int64_t cols = w.cols, rows = w.rows, g = w.group_size;
  const int64_t units = cols / 32, steps = (units + 1) / 2, groups = cols / g;
  const int64_t per_token = TokenFloats(steps, groups);
  thread_local AlignedBuffer<float> buf;
  if (buf.size() < size_t(per_token * n)) buf.resize(size_t(per_token * n));
  TokenView tv[kFastDecodeMaxTokens];
  for (int64_t i = 0; i < n; ++i)
    PrepareToken<F>(x + i * cols, cols, g, !kAffine, kSeg, buf.data() + i * per_token, &tv[i]);
  const RowCtx ctx{&w, &t, units, units / 2, (units & 1) != 0};
  // Rows prefetched ahead: whole 4-row blocks, about kPrefetchAheadBytes of codes.
  const int64_t ahead =
      4 * std::max<int64_t>(1, (kPrefetchAheadBytes + 2 * w.row_bytes) / (4 * w.row_bytes));
  auto body = [&](int64_t b, int64_t e) {
    int64_t r = b;
    for (; r + 4 <= e; r += 4) {
      const uint8_t* pf = r + 4 + ahead <= rows ? w.codes + (r + ahead) * w.row_bytes : nullptr;
      RowsAllTokens<F, kAffine, kLinear, kGps, kSeg, 4>(ctx, r, tv, n, y, rows, pf);
    }
    for (; r < e; ++r)
      RowsAllTokens<F, kAffine, kLinear, kGps, kSeg, 1>(ctx, r, tv, n, y, rows, nullptr);
    if (bias != nullptr)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = b; k < e; ++k) y[i * rows + k] += bias[k];
  };
  ForRowBlocks(rows, cols, body);
}

template <CodeFormat F, bool kAffine, bool kLinear = false>
void DispatchGroup(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
                   const Tables& t) {
  const int64_t g = w.group_size;
  if (g == 16) return RunFormat<F, kAffine, 4, kLinear>(x, n, w, bias, y, t);
  if (g == 32) return RunFormat<F, kAffine, 2, kLinear>(x, n, w, bias, y, t);
  if (SegmentSteps(g) == 2) return RunFormat<F, kAffine, 0, kLinear, 2>(x, n, w, bias, y, t);
  RunFormat<F, kAffine, 0, kLinear, 1>(x, n, w, bias, y, t);
}

template <CodeFormat F>
void Dispatch(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
              const Tables& t) {
  if (w.method == QuantMethod::kAffine) return DispatchGroup<F, true>(x, n, w, bias, y, t);
  if constexpr (F == CodeFormat::kQ8) {
    // convert's q8 tier: the codes are the u8 weights (no lookup)
    if (t.q8_linear) return DispatchGroup<F, false, true>(x, n, w, bias, y, t);
  }
  DispatchGroup<F, false>(x, n, w, bias, y, t);
}

}  // namespace

bool Avx512Supports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  if (f == CodeFormat::kTernary) return Avx512TernarySupports(w);
  const bool fmt_ok =
      f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4 || f == CodeFormat::kQ8;
  const int64_t g = w.group_size;
  // Groups of 64k columns tile the row (no odd unit: Rows' kGps = 0 path).
  return fmt_ok && w.cols % 32 == 0 && (g == 16 || g == 32 || (g % 64 == 0 && w.cols % g == 0));
}

TQ_AVX512 void Avx512Decode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                            float* y) {
  if (w.format == CodeFormat::kTernary) return Avx512TernaryDecode(x, n, w, bias, y);
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

#else  // not x86-64: no AVX-512 kernel

#include "kernels/cpu/packed_decode.h"

namespace tq::kernels::cpu::isa {
bool Avx512Supports(const PackedMatrix&) { return false; }
void Avx512Decode(const float*, int64_t, const PackedMatrix&, const float*, float*) {}
}  // namespace tq::kernels::cpu::isa

#endif
