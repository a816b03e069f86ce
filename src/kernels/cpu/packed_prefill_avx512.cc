// AVX-512 VNNI int8 GEMM for packed q2/q3/q4/q8 weights and many tokens (packed_prefill.h).
//
// Layout (steps of 64 codes in the format's byte order, avx512_codes.h PosToCode):
//   tokens: xq int8 [n, steps · 64], xs fp32 [n, sp] (activation scale of each step), xa fp32
//           [n, sp] (the token side of the correction below); sp = steps rounded up to 16, the
//           pad lanes 0.
//   panel:  wq u8 [rows, steps · 64] (looked-up centroid + 128, or the affine code), ws fp32
//           [rows, sp] (group scale · codebook scale of each step), wb fp32 [rows, sp] (the row
//           side of the correction).
// y[t, r] = Σ_s ws[r, s] · xs[t, s] · dpbusd(wq[r, s], xq[t, s]) + Σ_s wb[r, s] · xa[t, s], where
// the correction is -128 · xs · Σxq (the +128 of the u8 weights) with wb = ws for the codebook
// method, and Σ_{step} x with wb = the group minimum for affine codes.
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
#include "kernels/cpu/avx512_codes.h"
#include "kernels/cpu/packed_prefill.h"

namespace tq::kernels::cpu::isa {
namespace {

using namespace avx512;  // NOLINT: PosToCode, Expand, Lookup, Tables (avx512_codes.h)

// Bytes of a weight panel's expanded codes and of a token tile's int8 activations: each about a
// quarter of a 1-2 MB L2, so a tile's rows and tokens stay there while it runs.
constexpr int64_t kPanelBytes = 256 * 1024;
constexpr int64_t kTokenTileBytes = 256 * 1024;

// Rows ahead of the one being expanded whose codes are prefetched.
constexpr int64_t kPrefetchRows = 4;

struct Tokens {
  AlignedBuffer<int8_t> q;
  AlignedBuffer<float> s, a;
};

struct Panel {
  AlignedBuffer<uint8_t> q;
  AlignedBuffer<float> s, b;
};

Panel& ThreadPanel() {
  thread_local Panel p;
  return p;
}

template <typename T>
void Need(AlignedBuffer<T>& b, int64_t n) {
  if (b.size() < size_t(n)) b.resize(size_t(n));
}

// Quantizes tokens [b, e): per segment of `seg` steps (1, or 2 where groups span an even number
// of steps: Run), scale = max|x| / 127, xq = round-to-nearest-even(x / scale) (as the decode
// kernels' segments, SegmentSteps), stored in the format's byte order; xs and xa per step (a
// segment's steps share its scale).
template <CodeFormat F>
TQ_AVX512 void PrepareTokens(const float* x, int64_t b, int64_t e, int64_t cols, bool codebook,
                             int seg, int64_t sp, Tokens* tk) {
  const int64_t steps = cols / 64;
  alignas(64) uint8_t order[64];
  for (int p = 0; p < 64; ++p) order[p] = uint8_t(PosToCode<F>(p));
  const __m512i idx = _mm512_load_si512(order);
  for (int64_t t = b; t < e; ++t) {
    const float* xt = x + t * cols;
    int8_t* q = tk->q.data() + t * steps * 64;
    float* xs = tk->s.data() + t * sp;
    float* xa = tk->a.data() + t * sp;
    float inv = 0.0f, scale = 0.0f;
    for (int64_t s = 0; s < steps; ++s) {
      __m512 v[4];
      for (int k = 0; k < 4; ++k) v[k] = _mm512_loadu_ps(xt + s * 64 + 16 * k);
      if (s % seg == 0) {  // the segment's scale
        __m512 m = _mm512_setzero_ps();
        for (int64_t k = 0; k < 4 * seg; ++k)
          m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xt + s * 64 + 16 * k)));
        const float amax = _mm512_reduce_max_ps(m);
        inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        scale = amax / 127.0f;
      }
      __m512i isum = _mm512_setzero_si512();
      __m512 fsum = _mm512_setzero_ps();
      __m128i part[4];
      for (int k = 0; k < 4; ++k) {
        const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(v[k], _mm512_set1_ps(inv)));
        isum = _mm512_add_epi32(isum, qi);
        fsum = _mm512_add_ps(fsum, v[k]);
        part[k] = _mm512_cvtsepi32_epi8(qi);
      }
      __m512i nat = _mm512_castsi128_si512(part[0]);
      nat = _mm512_inserti32x4(nat, part[1], 1);
      nat = _mm512_inserti32x4(nat, part[2], 2);
      nat = _mm512_inserti32x4(nat, part[3], 3);
      // Byte p of the step holds code PosToCode(p) (the expanded weights' order).
      _mm512_store_si512(q + s * 64, _mm512_permutexvar_epi8(idx, nat));
      xs[s] = scale;
      xa[s] = codebook ? -128.0f * scale * float(_mm512_reduce_add_epi32(isum))
                       : _mm512_reduce_add_ps(fsum);
    }
    for (int64_t s = steps; s < sp; ++s) xs[s] = xa[s] = 0.0f;
  }
}

// Expands rows [r0, r0 + count) of w into the thread's panel.
template <CodeFormat F, bool kAffine>
TQ_AVX512 void ExpandPanel(const PackedMatrix& w, const Tables& t, int64_t r0, int64_t count,
                           int64_t sp, Panel* pn) {
  const int64_t steps = w.cols / 64, groups = w.cols / w.group_size, spg = w.group_size / 64;
  for (int64_t r = 0; r < count; ++r) {
    const uint8_t* p = w.codes + (r0 + r) * w.row_bytes;
    uint8_t* q = pn->q.data() + r * steps * 64;
    // Rows are contiguous; the hardware prefetchers stop at each 4 KiB page (packed_decode.h),
    // so the row kPrefetchRows ahead is asked for while this one expands.
    if (r + kPrefetchRows < count) {
      const char* next = reinterpret_cast<const char*>(p + kPrefetchRows * w.row_bytes);
      for (int64_t k = 0; k < w.row_bytes; k += 64) _mm_prefetch(next + k, _MM_HINT_T0);
    }
    for (int64_t s = 0; s < steps; ++s) {
      const __m512i c = Expand<F, false>(p + s * kStepBytes<F>);
      _mm512_store_si512(q + s * 64, t.q8_linear ? c : Lookup<F, kAffine>(c, t));
    }
    float* ws = pn->s.data() + r * sp;
    float* wb = pn->b.data() + r * sp;
    const int64_t i0 = (r0 + r) * groups;
    if (spg == 1) {  // groups of 64: one scale per step, 16 at a time (LoadScales)
      const __m512 cb = _mm512_set1_ps(t.cb_scale);
      for (int64_t j = 0; j < groups; j += 16) {
        const __mmask16 m = __mmask16((1u << std::min<int64_t>(16, groups - j)) - 1);
        const __m512 sc = _mm512_mul_ps(LoadScales(w, i0 + j, m), cb);
        _mm512_store_ps(ws + j, sc);
        _mm512_store_ps(
            wb + j, kAffine ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w.mins + i0 + j)) : sc);
      }
      continue;
    }
    for (int64_t j = 0; j < groups; ++j) {
      const float sc = w.Scale(r0 + r, j) * t.cb_scale;
      const float bj = kAffine ? F16ToF32(w.mins[(r0 + r) * groups + j]) : sc;
      for (int64_t s = j * spg; s < (j + 1) * spg; ++s) {
        ws[s] = sc;
        wb[s] = bj;
      }
    }
    for (int64_t s = steps; s < sp; ++s) ws[s] = wb[s] = 0.0f;
  }
}

struct TileArgs {
  const uint8_t* wq;  // the tile's first row in the panel
  const float* ws;
  const float* wb;
  const int8_t* xq;  // the tile's first token
  const float* xs;
  const float* xa;
  int64_t steps, sp;
  float* y;  // y[t · ystride + r] for the tile's first token and row
  int64_t ystride;
};

// R rows × N tokens over all steps; R · N zmm accumulators of 16 fp32 lanes, summed at the end.
// kSeg steps (a segment: one activation scale, within one weight group) chain their vpdpbusd in
// int32 and take one convert and one fma: at kSeg 2 four vector ops a 64-code step instead of
// six (the convert and fma per step were most of the tile's work on a 2-core Zen 4).
template <int R, int N, int kSeg>
TQ_AVX512 void Tile(const TileArgs& a) {
  const int64_t qs = a.steps * 64;
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) acc[r][t] = _mm512_setzero_ps();
  alignas(64) float f[R][N][16];
  for (int64_t s0 = 0; s0 < a.steps; s0 += 16) {
    // The 16 steps' fp32 factors (group scale × activation scale) and the correction.
    for (int r = 0; r < R; ++r) {
      const __m512 wsv = _mm512_load_ps(a.ws + r * a.sp + s0);
      const __m512 wbv = _mm512_load_ps(a.wb + r * a.sp + s0);
      for (int t = 0; t < N; ++t) {
        _mm512_store_ps(f[r][t], _mm512_mul_ps(wsv, _mm512_load_ps(a.xs + t * a.sp + s0)));
        acc[r][t] = _mm512_fmadd_ps(wbv, _mm512_load_ps(a.xa + t * a.sp + s0), acc[r][t]);
      }
    }
    const int sn = int(std::min<int64_t>(16, a.steps - s0));  // a multiple of kSeg
    for (int i = 0; i < sn; i += kSeg) {
      const int64_t o = (s0 + i) * 64;
      __m512i wv[R][kSeg];
      for (int r = 0; r < R; ++r)
        for (int l = 0; l < kSeg; ++l) wv[r][l] = _mm512_load_si512(a.wq + r * qs + o + l * 64);
      for (int t = 0; t < N; ++t) {
        __m512i xv[kSeg];
        for (int l = 0; l < kSeg; ++l) xv[l] = _mm512_load_si512(a.xq + t * qs + o + l * 64);
        for (int r = 0; r < R; ++r) {
          __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[r][0], xv[0]);
          for (int l = 1; l < kSeg; ++l) d = _mm512_dpbusd_epi32(d, wv[r][l], xv[l]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_set1_ps(f[r][t][i]), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) a.y[t * a.ystride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int R, int kSeg>
TQ_AVX512 void TileN(const TileArgs& a, int64_t n) {
  switch (n) {
    case 1:
      return Tile<R, 1, kSeg>(a);
    case 2:
      return Tile<R, 2, kSeg>(a);
    case 3:
      return Tile<R, 3, kSeg>(a);
    default:
      return Tile<R, 4, kSeg>(a);
  }
}

template <int kSeg>
TQ_AVX512 void TileRows(const TileArgs& a, int64_t rows, int64_t n) {
  if (rows == 4) return TileN<4, kSeg>(a, n);
  TileN<1, kSeg>(a, n);
}

template <CodeFormat F, bool kAffine>
void Run(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
         const Tables& t) {
  const int64_t rows = w.rows, cols = w.cols, steps = cols / 64, sp = (steps + 15) / 16 * 16;
  // The caller's buffers, shared with the workers (a thread_local named in a lambda would be the
  // worker's own).
  thread_local Tokens caller;
  Tokens& tk = caller;
  Need(tk.q, n * steps * 64);
  Need(tk.s, n * sp);
  Need(tk.a, n * sp);
  ThreadPool& pool = ThreadPool::Global();
  // Segments of 2 steps where a group spans an even number of steps (g = 128, 256, ...) and the
  // row has whole segments.
  const int64_t spg = w.group_size / 64;
  const int seg = spg % 2 == 0 && steps % 2 == 0 ? 2 : 1;
  pool.ParallelFor(n, std::max<int64_t>(1, 16384 / cols), [&](int64_t b, int64_t e) {
    PrepareTokens<F>(x, b, e, cols, !kAffine, seg, sp, &tk);
  });
  // Panels of whole 4-row blocks, at least two per thread when the matrix allows.
  int64_t per = std::clamp<int64_t>(kPanelBytes / cols / 4 * 4, 4, 512);
  while (per > 4 && (rows + per - 1) / per < 2 * pool.size()) per -= 4;
  const int64_t tt = std::clamp<int64_t>(kTokenTileBytes / cols / 4 * 4, 4, 1024);
  const int64_t panels = (rows + per - 1) / per;
  pool.Run(panels, [&](int64_t task, int) {
    const int64_t r0 = task * per, count = std::min(per, rows - r0);
    Panel& pn = ThreadPanel();
    Need(pn.q, count * steps * 64);
    Need(pn.s, count * sp);
    Need(pn.b, count * sp);
    ExpandPanel<F, kAffine>(w, t, r0, count, sp, &pn);
    for (int64_t t0 = 0; t0 < n; t0 += tt) {
      const int64_t t1 = std::min(n, t0 + tt);
      for (int64_t r = 0; r < count;) {
        const int64_t rr = count - r >= 4 ? 4 : 1;
        for (int64_t tok = t0; tok < t1; tok += 4) {
          const TileArgs a{pn.q.data() + r * steps * 64,
                           pn.s.data() + r * sp,
                           pn.b.data() + r * sp,
                           tk.q.data() + tok * steps * 64,
                           tk.s.data() + tok * sp,
                           tk.a.data() + tok * sp,
                           steps,
                           sp,
                           y + tok * rows + r0 + r,
                           rows};
          const int64_t nt = std::min<int64_t>(4, t1 - tok);
          if (seg == 2) {
            TileRows<2>(a, rr, nt);
          } else {
            TileRows<1>(a, rr, nt);
          }
        }
        r += rr;
      }
    }
    if (bias != nullptr)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = r0; k < r0 + count; ++k) y[i * rows + k] += bias[k];
  });
}

template <CodeFormat F>
void Dispatch(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
              const Tables& t) {
  if (w.method == QuantMethod::kAffine) return Run<F, true>(x, n, w, bias, y, t);
  Run<F, false>(x, n, w, bias, y, t);
}

}  // namespace

bool Avx512PrefillSupports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  const bool fmt_ok =
      f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4 || f == CodeFormat::kQ8;
  return fmt_ok && w.group_size % 64 == 0 && w.cols % 64 == 0;
}

TQ_AVX512 void Avx512Prefill(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
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

#else  // not x86-64: no AVX-512 kernel

#include "kernels/cpu/packed_prefill.h"

namespace tq::kernels::cpu::isa {
bool Avx512PrefillSupports(const PackedMatrix&) { return false; }
void Avx512Prefill(const float*, int64_t, const PackedMatrix&, const float*, float*) {}
}  // namespace tq::kernels::cpu::isa

#endif
