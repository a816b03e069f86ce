// AVX2 GEMM for packed q2/q3/q4/q8 weights and many tokens (packed_prefill.h), for CPUs
// without AVX-512 VNNI: int8-grade operands (activations rounded to int8 per 64 values, the
// codebook to int8, as packed_decode.h) carried in int16 lanes and multiplied by vpmaddwd.
//
// Layout (steps of 64 codes in avx2_codes.h's PosToCode order, four 16-value quarters):
//   tokens: xq int16 [n, steps · 64] (the int8 activations, widened), xs fp32 [n, sp] (activation
//           scale of each step), xa fp32 [n, sp] (Σx of each step, affine only); sp = steps
//           rounded up to 8, the pad lanes 0.
//   panel:  wq int16 [rows, steps · 64] (signed centroid, or the affine code), ws fp32 [rows, sp]
//           (group scale · codebook scale of each step), wb fp32 [rows, sp] (the group minimum
//           of each step, affine only).
// y[t, r] = Σ_s ws[r, s] · xs[t, s] · Σ_{64 codes} wq · xq (+ Σ_s wb[r, s] · xa[t, s] affine).
// A pair (row, token) per step: 4 vpmaddwd, 3 vpaddd, one convert and one fma.
// Why int16: on the CPUs this level serves (Zen 2-4, Intel client cores) vpsignb, vpmaddubsw,
// vpmaddwd and fma all issue on the same two vector ports; the int8 form of a pair-step (2
// vpsignb to give x w's sign, 2 vpmaddubsw, 2 vpmaddwd to widen the int16 pair sums, the fma)
// took 7 of their slots, the int16 form takes 5 (vpaddd goes to any of four). Measured on an
// AMD EPYC (Zen 4) at the avx2 level: docs/BENCHMARKS.md "CPU server and prefill without AMX
// (issue 23, session 15)". The products and sums are the same integers as the int8 form's (exact
// in int32: |Σ| <= 64 · 128 · 127), so the result differs from it only in fp32 summation order;
// affine q8 codes (0..255), which vpmaddubsw's int16 pair sums could not take, are exact too.
#if defined(__x86_64__)
// GCC 12 warns about the _mm*_undefined_* inside its own intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/avx2_codes.h"
#include "kernels/cpu/packed_decode.h"
#include "kernels/cpu/packed_prefill.h"

namespace tq::kernels::cpu::isa {
namespace {

using namespace avx2;  // NOLINT: PosToCode, ExpandStep, Lookup, Tables (avx2_codes.h)

// Bytes of a weight panel's expanded codes and of a token tile's int16 activations: each about a
// quarter of a 1-2 MB L2, so a tile's rows and tokens stay there while it runs.
constexpr int64_t kPanelBytes = 256 * 1024;
constexpr int64_t kTokenTileBytes = 256 * 1024;
constexpr int64_t kPrefetchRows = 4;  // rows ahead of the one being expanded, prefetched
// Steps of one k chunk: a 4-row tile's chunk of the panel (4 · 32 · 64 int16 = 16 KB) stays in
// L1 while the token pairs of the token tile stream past it from L2.
constexpr int kChunkSteps = 32;

struct Tokens {
  AlignedBuffer<int16_t> q;
  AlignedBuffer<float> s, a;
};

struct Panel {
  AlignedBuffer<int16_t> q;
  AlignedBuffer<float> s, b;
};

// The 32 bytes at v widened to 32 int16 at q (sign- or zero-extended), in order.
template <bool kUnsigned>
TQ_AVX2_INLINE void Widen(__m256i v, int16_t* q) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  __m256i* d = reinterpret_cast<__m256i*>(q);
  if constexpr (kUnsigned) {
    _mm256_store_si256(d, _mm256_cvtepu8_epi16(lo));
    _mm256_store_si256(d + 1, _mm256_cvtepu8_epi16(hi));
  } else {
    _mm256_store_si256(d, _mm256_cvtepi8_epi16(lo));
    _mm256_store_si256(d + 1, _mm256_cvtepi8_epi16(hi));
  }
}

template <typename T>
void Need(AlignedBuffer<T>& b, int64_t n) {
  if (b.size() < size_t(n)) b.resize(size_t(n));
}

template <CodeFormat F>
TQ_AVX2 void PrepareTokens(const float* x, int64_t b, int64_t e, int64_t cols, bool affine,
                           int64_t sp, Tokens* tk) {
  const int64_t steps = cols / 64;
  thread_local AlignedBuffer<int8_t> q8;  // one token's int8 activations
  if (q8.size() < size_t(cols)) q8.resize(size_t(cols));
  for (int64_t t = b; t < e; ++t) {
    float* xs = tk->s.data() + t * sp;
    float* xa = tk->a.data() + t * sp;
    QuantizeSteps<F>(x + t * cols, cols, q8.data(), xs, affine ? xa : nullptr);
    for (int64_t s = steps; s < sp; ++s) xs[s] = xa[s] = 0.0f;
    int16_t* q = tk->q.data() + t * steps * 64;
    for (int64_t i = 0; i < cols; i += 32)
      Widen<false>(_mm256_load_si256(reinterpret_cast<const __m256i*>(q8.data() + i)), q + i);
  }
}

// Expands steps [s0, s0 + sn) of rows [r0, r0 + count) of w into q (row stride qstride int16
// values). Each step also prefetches its share of the same steps of the row kPrefetchRows
// further on (when below w.rows): rows are contiguous, and the hardware prefetchers stop at each
// 4 KiB page (packed_decode.h); a block's prefetch issued all at its start (the first version)
// left one thread streaming the weights at half the decode kernel's rate (perf, session 15).
template <CodeFormat F, bool kAffine>
TQ_AVX2 void ExpandRows(const PackedMatrix& w, const Tables& t, int64_t r0, int64_t count,
                        int64_t s0, int sn, int64_t qstride, int16_t* q) {
  constexpr int64_t kSb = kStepBytes<F>;
  for (int64_t r = 0; r < count; ++r) {
    const uint8_t* p = w.codes + (r0 + r) * w.row_bytes;
    const char* pf = r0 + r + kPrefetchRows < w.rows
                         ? reinterpret_cast<const char*>(p + kPrefetchRows * w.row_bytes)
                         : nullptr;
    int16_t* qr = q + r * qstride;
    for (int64_t s = s0; s < s0 + sn; ++s) {
      if (pf != nullptr)
        for (int64_t k = (s * kSb + 63) / 64 * 64; k < (s + 1) * kSb; k += 64)
          _mm_prefetch(pf + k, _MM_HINT_T0);
      __m256i a, b;
      ExpandStep<F>(p + s * kSb, &a, &b);
      if constexpr (!kAffine) {
        a = Centroids<F>(a, t);
        b = Centroids<F>(b, t);
      }
      Widen<kAffine>(a, qr + (s - s0) * 64);
      Widen<kAffine>(b, qr + (s - s0) * 64 + 32);
    }
  }
}

// ws, wb [count, sp]: the fp32 factor (group scale · codebook scale) and the affine minimum of
// each step of rows [r0, r0 + count), the pad steps 0.
template <bool kAffine>
void StepScales(const PackedMatrix& w, const Tables& t, int64_t r0, int64_t count, int64_t sp,
                float* ws, float* wb) {
  const int64_t steps = w.cols / 64, groups = w.cols / w.group_size, spg = w.group_size / 64;
  for (int64_t r = 0; r < count; ++r, ws += sp, wb += sp) {
    for (int64_t j = 0; j < groups; ++j) {
      const float sc = w.Scale(r0 + r, j) * t.cb_scale;
      const float bj = kAffine ? F16ToF32(w.mins[(r0 + r) * groups + j]) : 0.0f;
      for (int64_t s = j * spg; s < (j + 1) * spg; ++s) {
        ws[s] = sc;
        wb[s] = bj;
      }
    }
    for (int64_t s = steps; s < sp; ++s) ws[s] = wb[s] = 0.0f;
  }
}

// One tile's operands, each pointer at the tile's first row / token and the chunk's first step.
struct TileArgs {
  const int16_t* wq;  // expanded rows, wstride int16 apart
  int64_t wstride;
  const float* ws;  // [R, sp] step factors, wb [R, sp] affine minimums
  const float* wb;
  const int16_t* xq;  // tokens, xstride int16 apart
  int64_t xstride;
  const float* xs;  // [N, sp] activation scales, xa [N, sp] Σx per step (affine)
  const float* xa;
  int64_t sp;
  float* y;  // y[t · ystride + r]
  int64_t ystride;
};

// acc + cvt(Σ_64 x · w) · f for one (row, token) and step: x the token's four quarters, w the
// row's step, f its factor.
TQ_AVX2_INLINE __m256 PairStep(__m256 acc, __m256i x0, __m256i x1, __m256i x2, __m256i x3,
                               const int16_t* w, const float* f) {
  const __m256i* wp = reinterpret_cast<const __m256i*>(w);
  const __m256i d01 = _mm256_add_epi32(_mm256_madd_epi16(x0, _mm256_load_si256(wp)),
                                       _mm256_madd_epi16(x1, _mm256_load_si256(wp + 1)));
  const __m256i d23 = _mm256_add_epi32(_mm256_madd_epi16(x2, _mm256_load_si256(wp + 2)),
                                       _mm256_madd_epi16(x3, _mm256_load_si256(wp + 3)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(d01, d23)), _mm256_broadcast_ss(f),
                         acc);
}

// y[t, r] = (first ? 0 : y[t, r]) + corr[r · N + t] (when given) + the products of the chunk's sn
// steps; f [R, N, kChunkSteps]: the steps' fp32 factors. Each step loads a token's four quarters
// once for its R rows; the rows' quarters and the factors are memory operands.
template <int R, int N>
TQ_AVX2 void TileSteps(const TileArgs& a, int sn, const float* f, bool first, const float* corr) {
  __m256 acc[R * N];
  for (auto& v : acc) v = _mm256_setzero_ps();
  for (int i = 0; i < sn; ++i) {
    for (int t = 0; t < N; ++t) {
      const __m256i* xp = reinterpret_cast<const __m256i*>(a.xq + t * a.xstride + i * 64);
      const __m256i x0 = _mm256_load_si256(xp), x1 = _mm256_load_si256(xp + 1),
                    x2 = _mm256_load_si256(xp + 2), x3 = _mm256_load_si256(xp + 3);
      for (int r = 0; r < R; ++r)
        acc[r * N + t] = PairStep(acc[r * N + t], x0, x1, x2, x3, a.wq + r * a.wstride + i * 64,
                                  f + (r * N + t) * kChunkSteps + i);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < N; ++t) {
      float& out = a.y[t * a.ystride + r];
      const float v = HorizontalSum(acc[r * N + t]) + (corr ? corr[r * N + t] : 0.0f);
      out = first ? v : out + v;
    }
  }
}

// The 4 × 2 tile, the one nearly all products take, with its 8 accumulators as named values:
// written as the loops above, GCC 12 kept the accumulator array in memory and stored all of it
// at every step (objdump, session 15). 16 ymm: 8 accumulators, a token's four quarters, three
// temporaries, one for the factor.
template <>
TQ_AVX2 void TileSteps<4, 2>(const TileArgs& a, int sn, const float* f, bool first,
                             const float* corr) {
  constexpr int kc = kChunkSteps;
  const int64_t ws = a.wstride, xs = a.xstride;
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00;
  const int16_t* w = a.wq;
  const int16_t* x = a.xq;
  for (int i = 0; i < sn; ++i, w += 64, x += 64, ++f) {
    const __m256i* xp = reinterpret_cast<const __m256i*>(x);
    __m256i x0 = _mm256_load_si256(xp), x1 = _mm256_load_si256(xp + 1),
            x2 = _mm256_load_si256(xp + 2), x3 = _mm256_load_si256(xp + 3);
    c00 = PairStep(c00, x0, x1, x2, x3, w, f);
    c10 = PairStep(c10, x0, x1, x2, x3, w + ws, f + 2 * kc);
    c20 = PairStep(c20, x0, x1, x2, x3, w + 2 * ws, f + 4 * kc);
    c30 = PairStep(c30, x0, x1, x2, x3, w + 3 * ws, f + 6 * kc);
    xp = reinterpret_cast<const __m256i*>(x + xs);
    x0 = _mm256_load_si256(xp);
    x1 = _mm256_load_si256(xp + 1);
    x2 = _mm256_load_si256(xp + 2);
    x3 = _mm256_load_si256(xp + 3);
    c01 = PairStep(c01, x0, x1, x2, x3, w, f + kc);
    c11 = PairStep(c11, x0, x1, x2, x3, w + ws, f + 3 * kc);
    c21 = PairStep(c21, x0, x1, x2, x3, w + 2 * ws, f + 5 * kc);
    c31 = PairStep(c31, x0, x1, x2, x3, w + 3 * ws, f + 7 * kc);
  }
  const __m256 acc[8] = {c00, c01, c10, c11, c20, c21, c30, c31};  // [r, t]
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < 2; ++t) {
      float& out = a.y[t * a.ystride + r];
      const float v = HorizontalSum(acc[r * 2 + t]) + (corr ? corr[r * 2 + t] : 0.0f);
      out = first ? v : out + v;
    }
  }
}

// R rows × N tokens over one chunk of sn steps: the chunk's factors (group scale × activation
// scale) and the affine correction Σ_s min · Σx, then its products.
template <bool kAffine, int R, int N>
TQ_AVX2 void Tile(const TileArgs& a, int sn, bool first) {
  alignas(32) float f[R * N * kChunkSteps];
  float corr[R * N];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < N; ++t) {
      __m256 c = _mm256_setzero_ps();
      for (int i = 0; i < sn; i += 8) {  // ws and xs are padded to 8 steps with zeros
        _mm256_store_ps(f + (r * N + t) * kChunkSteps + i,
                        _mm256_mul_ps(_mm256_load_ps(a.ws + r * a.sp + i),
                                      _mm256_load_ps(a.xs + t * a.sp + i)));
        if constexpr (kAffine)
          c = _mm256_fmadd_ps(_mm256_load_ps(a.wb + r * a.sp + i),
                              _mm256_load_ps(a.xa + t * a.sp + i), c);
      }
      corr[r * N + t] = HorizontalSum(c);
    }
  }
  TileSteps<R, N>(a, sn, f, first, kAffine ? corr : nullptr);
}

// The tiles of rows [r, r + rr) (rr = 4 or 1) × tokens [t0, t1) over one chunk.
template <bool kAffine>
TQ_AVX2 void TileRange(TileArgs a, int64_t rr, int64_t t0, int64_t t1, int sn, bool first) {
  const float* xs = a.xs;
  const float* xa = a.xa;
  const int16_t* xq = a.xq;
  float* y = a.y;
  for (int64_t tok = t0; tok < t1; tok += 2) {
    a.xq = xq + tok * a.xstride;
    a.xs = xs + tok * a.sp;
    a.xa = xa + tok * a.sp;
    a.y = y + tok * a.ystride;
    const bool two = t1 - tok >= 2;
    if (rr == 4) {
      two ? Tile<kAffine, 4, 2>(a, sn, first) : Tile<kAffine, 4, 1>(a, sn, first);
    } else {
      two ? Tile<kAffine, 1, 2>(a, sn, first) : Tile<kAffine, 1, 1>(a, sn, first);
    }
  }
}

template <CodeFormat F, bool kAffine>
void Run(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
         const Tables& t) {
  const int64_t rows = w.rows, cols = w.cols, steps = cols / 64, sp = (steps + 7) / 8 * 8;
  // The caller's buffers, shared with the workers (a thread_local named in a lambda would be the
  // worker's own).
  thread_local Tokens caller;
  Tokens& tk = caller;
  Need(tk.q, n * steps * 64);
  Need(tk.s, n * sp);
  Need(tk.a, n * sp);
  ThreadPool& pool = ThreadPool::Global();
  pool.ParallelFor(n, std::max<int64_t>(1, 16384 / cols), [&](int64_t b, int64_t e) {
    PrepareTokens<F>(x, b, e, cols, kAffine, sp, &tk);
  });
  constexpr int64_t kValueBytes = 2;  // int16 per expanded code or activation
  const int64_t tt = std::clamp<int64_t>(kTokenTileBytes / (cols * kValueBytes) / 2 * 2, 2, 1024);
  // args for rows [r, ...) of a buffer q / ws / wb with row stride wstride, all tokens.
  auto args = [&](const int16_t* q, int64_t wstride, const float* ws, const float* wb, int64_t s0,
                  int64_t r) {
    return TileArgs{q,          wstride,          ws + s0,          wb + s0, tk.q.data() + s0 * 64,
                    steps * 64, tk.s.data() + s0, tk.a.data() + s0, sp,      y + r,
                    rows};
  };
  auto add_bias = [&](int64_t b, int64_t e) {
    if (bias != nullptr)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = b; k < e; ++k) y[i * rows + k] += bias[k];
  };
  if (n <= tt) {
    // Few tokens (the server's batched decode steps): a 4-row block's chunk is expanded into an
    // L1 buffer and multiplied by every token at once, so the codes are expanded once per call
    // and never written to L2 (a panel, below, costs its stores and reloads for only n tokens).
    ForRowBlocks(rows, cols, [&](int64_t b, int64_t e) {
      thread_local Panel block;
      Panel& bk = block;
      Need(bk.q, 4 * kChunkSteps * 64);
      Need(bk.s, 4 * sp);
      Need(bk.b, 4 * sp);
      for (int64_t r = b; r < e;) {
        const int64_t rr = e - r >= 4 ? 4 : 1;
        // The next block's scales arrive while this one runs (its first touch missed the
        // caches: StepScales took 7% of an 8-row step before, perf, session 15).
        PrefetchScales(w, r + rr, 4);
        StepScales<kAffine>(w, t, r, rr, sp, bk.s.data(), bk.b.data());
        for (int64_t s0 = 0; s0 < steps; s0 += kChunkSteps) {
          const int sn = int(std::min<int64_t>(kChunkSteps, steps - s0));
          ExpandRows<F, kAffine>(w, t, r, rr, s0, sn, kChunkSteps * 64, bk.q.data());
          TileRange<kAffine>(args(bk.q.data(), kChunkSteps * 64, bk.s.data(), bk.b.data(), s0, r),
                             rr, 0, n, sn, s0 == 0);
        }
        r += rr;
      }
      add_bias(b, e);
    });
    return;
  }
  // Many tokens (prefill): panels of whole 4-row blocks (~kPanelBytes, L2), at least two per
  // thread when the matrix allows, expanded once and multiplied by all token tiles.
  int64_t per = std::clamp<int64_t>(kPanelBytes / (cols * kValueBytes) / 4 * 4, 4, 512);
  while (per > 4 && (rows + per - 1) / per < 2 * pool.size()) per -= 4;
  const int64_t panels = (rows + per - 1) / per;
  pool.Run(panels, [&](int64_t task, int) {
    const int64_t r0 = task * per, count = std::min(per, rows - r0);
    thread_local Panel panel;
    Panel& pn = panel;
    Need(pn.q, count * steps * 64);
    Need(pn.s, count * sp);
    Need(pn.b, count * sp);
    PrefetchScales(w, r0, count);  // read by StepScales after the expansion
    ExpandRows<F, kAffine>(w, t, r0, count, 0, int(steps), steps * 64, pn.q.data());
    StepScales<kAffine>(w, t, r0, count, sp, pn.s.data(), pn.b.data());
    for (int64_t t0 = 0; t0 < n; t0 += tt) {
      const int64_t t1 = std::min(n, t0 + tt);
      for (int64_t s0 = 0; s0 < steps; s0 += kChunkSteps) {
        const int sn = int(std::min<int64_t>(kChunkSteps, steps - s0));
        for (int64_t r = 0; r < count;) {
          const int64_t rr = count - r >= 4 ? 4 : 1;
          const TileArgs a = args(pn.q.data() + r * steps * 64 + s0 * 64, steps * 64,
                                  pn.s.data() + r * sp, pn.b.data() + r * sp, s0, r0 + r);
          TileRange<kAffine>(a, rr, t0, t1, sn, s0 == 0);
          r += rr;
        }
      }
    }
    add_bias(r0, r0 + count);
  });
}

template <CodeFormat F>
void Dispatch(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
              const Tables& t) {
  if (w.method == QuantMethod::kAffine) return Run<F, true>(x, n, w, bias, y, t);
  Run<F, false>(x, n, w, bias, y, t);
}

}  // namespace

bool Avx2PrefillSupports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  const bool fmt_ok =
      f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4 || f == CodeFormat::kQ8;
  return fmt_ok && w.group_size % 64 == 0 && w.cols % 64 == 0;
}

TQ_AVX2 void Avx2Prefill(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
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

#else  // not x86-64: no AVX2 kernel

#include "kernels/cpu/packed_prefill.h"

namespace tq::kernels::cpu::isa {
bool Avx2PrefillSupports(const PackedMatrix&) { return false; }
void Avx2Prefill(const float*, int64_t, const PackedMatrix&, const float*, float*) {}
}  // namespace tq::kernels::cpu::isa

#endif
