// AVX2 int8 GEMM for packed q2/q3/q4/q8 weights and many tokens (packed_prefill.h), for CPUs
// without AVX-512 VNNI: the AVX-512 kernel's structure (packed_prefill_avx512.cc) on 256-bit
// registers and vpmaddubsw (avx2_codes.h).
//
// Layout (steps of 64 codes in avx2_codes.h's PosToCode order, two 32-byte halves):
//   tokens: xq int8 [n, steps · 64], xs fp32 [n, sp] (activation scale of each step), xa fp32
//           [n, sp] (Σx of each step, affine only); sp = steps rounded up to 8, the pad lanes 0.
//   panel:  wq int8 [rows, steps · 64] (signed centroid, or the affine code 0..15), ws fp32
//           [rows, sp] (group scale · codebook scale of each step), wb fp32 [rows, sp] (the
//           group minimum of each step, affine only).
// y[t, r] = Σ_s ws[r, s] · xs[t, s] · Σ_{64 codes} wq · xq (+ Σ_s wb[r, s] · xa[t, s] affine).
// A pair (row, token) per step: vpsignb ×2 (x takes w's sign), vpmaddubsw ×2 (|w| · that, pair
// sums <= 2·127·127: no saturation), vpmaddwd ×2, vpaddd, one convert and one fma.
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
#include "kernels/cpu/packed_prefill.h"

namespace tq::kernels::cpu::isa {
namespace {

using namespace avx2;  // NOLINT: PosToCode, ExpandStep, Lookup, Tables (avx2_codes.h)

// Bytes of a weight panel's expanded codes and of a token tile's int8 activations: each about a
// quarter of a 1-2 MB L2, so a tile's rows and tokens stay there while it runs.
constexpr int64_t kPanelBytes = 256 * 1024;
constexpr int64_t kTokenTileBytes = 256 * 1024;
constexpr int64_t kPrefetchRows = 4;  // rows ahead of the one being expanded, prefetched

struct Tokens {
  AlignedBuffer<int8_t> q;
  AlignedBuffer<float> s, a;
};

struct Panel {
  AlignedBuffer<int8_t> q;
  AlignedBuffer<float> s, b;
};

template <typename T>
void Need(AlignedBuffer<T>& b, int64_t n) {
  if (b.size() < size_t(n)) b.resize(size_t(n));
}

template <CodeFormat F>
TQ_AVX2 void PrepareTokens(const float* x, int64_t b, int64_t e, int64_t cols, bool affine,
                           int64_t sp, Tokens* tk) {
  const int64_t steps = cols / 64;
  for (int64_t t = b; t < e; ++t) {
    float* xs = tk->s.data() + t * sp;
    float* xa = tk->a.data() + t * sp;
    QuantizeSteps<F>(x + t * cols, cols, tk->q.data() + t * steps * 64, xs, affine ? xa : nullptr);
    for (int64_t s = steps; s < sp; ++s) xs[s] = xa[s] = 0.0f;
  }
}

// Expands rows [r0, r0 + count) of w into the thread's panel.
template <CodeFormat F, bool kAffine>
TQ_AVX2 void ExpandPanel(const PackedMatrix& w, const Tables& t, int64_t r0, int64_t count,
                         int64_t sp, Panel* pn) {
  const int64_t steps = w.cols / 64, groups = w.cols / w.group_size, spg = w.group_size / 64;
  for (int64_t r = 0; r < count; ++r) {
    const uint8_t* p = w.codes + (r0 + r) * w.row_bytes;
    __m256i* q = reinterpret_cast<__m256i*>(pn->q.data() + r * steps * 64);
    // Rows are contiguous; the hardware prefetchers stop at each 4 KiB page (packed_decode.h).
    if (r + kPrefetchRows < count) {
      const char* next = reinterpret_cast<const char*>(p + kPrefetchRows * w.row_bytes);
      for (int64_t k = 0; k < w.row_bytes; k += 64) _mm_prefetch(next + k, _MM_HINT_T0);
    }
    for (int64_t s = 0; s < steps; ++s) {
      __m256i a, b;
      ExpandStep<F>(p + s * kStepBytes<F>, &a, &b);
      if constexpr (!kAffine) {
        a = Centroids<F>(a, t);
        b = Centroids<F>(b, t);
      }
      _mm256_store_si256(q + 2 * s, a);
      _mm256_store_si256(q + 2 * s + 1, b);
    }
    float* ws = pn->s.data() + r * sp;
    float* wb = pn->b.data() + r * sp;
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

struct TileArgs {
  const int8_t* wq;  // the tile's first row in the panel
  const float* ws;
  const float* wb;
  const int8_t* xq;  // the tile's first token
  const float* xs;
  const float* xa;
  int64_t steps, sp;
  float* y;  // y[t · ystride + r] for the tile's first token and row
  int64_t ystride;
};

// R rows × N tokens over all steps; R · N ymm accumulators of 8 fp32 lanes, summed at the end.
template <bool kAffine, int R, int N>
TQ_AVX2 void Tile(const TileArgs& a) {
  const int64_t qs = a.steps * 64;
  __m256 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  alignas(32) float f[R][N][8];
  for (int64_t s0 = 0; s0 < a.steps; s0 += 8) {
    // The 8 steps' fp32 factors (group scale × activation scale) and the affine correction.
    for (int r = 0; r < R; ++r) {
      const __m256 wsv = _mm256_load_ps(a.ws + r * a.sp + s0);
      for (int t = 0; t < N; ++t) {
        _mm256_store_ps(f[r][t], _mm256_mul_ps(wsv, _mm256_load_ps(a.xs + t * a.sp + s0)));
        if constexpr (kAffine)
          acc[r][t] = _mm256_fmadd_ps(_mm256_load_ps(a.wb + r * a.sp + s0),
                                      _mm256_load_ps(a.xa + t * a.sp + s0), acc[r][t]);
      }
    }
    const int sn = int(std::min<int64_t>(8, a.steps - s0));
    for (int i = 0; i < sn; ++i) {
      const int64_t o = (s0 + i) * 64;
      __m256i xv[N][2];
      for (int t = 0; t < N; ++t)
        for (int h = 0; h < 2; ++h)
          xv[t][h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.xq + t * qs + o) + h);
      for (int r = 0; r < R; ++r) {
        const __m256i* wp = reinterpret_cast<const __m256i*>(a.wq + r * qs + o);
        __m256i d[N];
        if constexpr (kAffine) {
          const __m256i w0 = _mm256_load_si256(wp), w1 = _mm256_load_si256(wp + 1);
          for (int t = 0; t < N; ++t)
            d[t] = _mm256_add_epi32(DotUnsigned(w0, xv[t][0]), DotUnsigned(w1, xv[t][1]));
        } else {
          const Looked l0{_mm256_abs_epi8(_mm256_load_si256(wp)), _mm256_load_si256(wp)};
          const Looked l1{_mm256_abs_epi8(_mm256_load_si256(wp + 1)), _mm256_load_si256(wp + 1)};
          for (int t = 0; t < N; ++t)
            d[t] = _mm256_add_epi32(DotSigned(l0, xv[t][0]), DotSigned(l1, xv[t][1]));
        }
        for (int t = 0; t < N; ++t)
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d[t]), _mm256_broadcast_ss(&f[r][t][i]),
                                      acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) a.y[t * a.ystride + r] = HorizontalSum(acc[r][t]);
}

template <bool kAffine, int R>
TQ_AVX2 void TileN(const TileArgs& a, int64_t n) {
  if (n == 1) return Tile<kAffine, R, 1>(a);
  Tile<kAffine, R, 2>(a);
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
  // Panels of whole 4-row blocks, at least two per thread when the matrix allows.
  int64_t per = std::clamp<int64_t>(kPanelBytes / cols / 4 * 4, 4, 512);
  while (per > 4 && (rows + per - 1) / per < 2 * pool.size()) per -= 4;
  const int64_t tt = std::clamp<int64_t>(kTokenTileBytes / cols / 2 * 2, 2, 1024);
  const int64_t panels = (rows + per - 1) / per;
  pool.Run(panels, [&](int64_t task, int) {
    const int64_t r0 = task * per, count = std::min(per, rows - r0);
    thread_local Panel panel;
    Panel& pn = panel;
    Need(pn.q, count * steps * 64);
    Need(pn.s, count * sp);
    Need(pn.b, count * sp);
    ExpandPanel<F, kAffine>(w, t, r0, count, sp, &pn);
    for (int64_t t0 = 0; t0 < n; t0 += tt) {
      const int64_t t1 = std::min(n, t0 + tt);
      for (int64_t r = 0; r < count;) {
        const int64_t rr = count - r >= 4 ? 4 : 1;
        for (int64_t tok = t0; tok < t1; tok += 2) {
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
          if (rr == 4) {
            TileN<kAffine, 4>(a, std::min<int64_t>(2, t1 - tok));
          } else {
            TileN<kAffine, 1>(a, std::min<int64_t>(2, t1 - tok));
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

bool Avx2PrefillSupports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  // Affine q8 codes (0..255) times int8 would saturate vpmaddubsw's int16 pair sums.
  const bool q8_ok = f == CodeFormat::kQ8 && w.method != QuantMethod::kAffine;
  const bool fmt_ok = f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4 || q8_ok;
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
