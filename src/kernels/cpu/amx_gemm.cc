// AMX bf16 GEMM (amx_gemm.h). Tiles: C 0..3, A (weights) 4..5, B (activations) 6..7; every tile
// is configured 16 rows x 64 bytes. A block of 32 weight rows x 32 tokens keeps four C tiles for
// a k block; per 32 k it loads two A and two B tiles for four tdpbf16ps (16x16x32 MACs each).
#include "kernels/cpu/amx_gemm.h"

#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#define TQ_AMX_BUILD 1
#define TQ_AMX                                                                  \
  __attribute__((                                                               \
      target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma," \
             "f16c")))
#define TQ_AMX_INLINE TQ_AMX inline __attribute__((always_inline))
#endif

namespace tq::kernels::cpu::amx {

bool Active() { return ActiveIsa() >= Isa::kAmx; }

#if defined(TQ_AMX_BUILD)
namespace {

constexpr int64_t kKb = 256;  // k block: one token block of B (16 KB) + a 32-row A block fit L1
constexpr int64_t kMaxPanel = 256;  // weight rows per task

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TQ_AMX void ConfigureTiles() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) {
    c.colsb[i] = 64;
    c.rows[i] = 16;
  }
  _tile_loadconfig(&c);
}

// C (+)= A · B over kchunks x 32 k for 32 weight rows x 16·NT tokens. a: bf16 rows at lda
// elements; b: the activations' hi (and lo) of one token block at the block's first k pair
// (rows of ldb pairs); c: fp32 [32 rows][ldc tokens].
template <int NT, bool kSplit>
TQ_AMX void Block(const uint16_t* a, int64_t lda, const uint16_t* bhi, const uint16_t* blo,
                  int64_t ldb, int64_t kchunks, float* c, int64_t ldc, bool zero) {
  const int64_t lda_b = lda * 2, ldb_b = ldb * 4, ldc_b = ldc * 4;
  if (zero) {
    _tile_zero(0);
    _tile_zero(2);
    if constexpr (NT == 2) {
      _tile_zero(1);
      _tile_zero(3);
    }
  } else {
    _tile_loadd(0, c, ldc_b);
    _tile_loadd(2, c + 16 * ldc, ldc_b);
    if constexpr (NT == 2) {
      _tile_loadd(1, c + 16, ldc_b);
      _tile_loadd(3, c + 16 * ldc + 16, ldc_b);
    }
  }
  for (int64_t kk = 0; kk < kchunks; ++kk) {
    _tile_loadd(4, a + kk * 32, lda_b);
    _tile_loadd(5, a + 16 * lda + kk * 32, lda_b);
    const int64_t boff = kk * 16 * ldb * 2;  // 16 k pairs per chunk
    _tile_loadd(6, bhi + boff, ldb_b);
    if constexpr (NT == 2) _tile_loadd(7, bhi + boff + 32, ldb_b);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (NT == 2) {
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
    if constexpr (kSplit) {
      _tile_loadd(6, blo + boff, ldb_b);
      if constexpr (NT == 2) _tile_loadd(7, blo + boff + 32, ldb_b);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT == 2) {
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, c, ldc_b);
  _tile_stored(2, c + 16 * ldc, ldc_b);
  if constexpr (NT == 2) {
    _tile_stored(1, c + 16, ldc_b);
    _tile_stored(3, c + 16 * ldc + 16, ldc_b);
  }
}

using BlockFn = void (*)(const uint16_t*, int64_t, const uint16_t*, const uint16_t*, int64_t,
                         int64_t, float*, int64_t, bool);

// Transposes 16 x 16 dwords: r[i] lane j -> r[j] lane i (4 rounds of 16 shuffles).
TQ_AMX_INLINE void Transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], 128-bit lane L: column 4L + j of rows 4i .. 4i+3.
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i a = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);
    const __m512i b = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd);
    const __m512i c = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
    const __m512i d = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
    t[j] = _mm512_shuffle_i32x4(a, c, 0x88);
    t[8 + j] = _mm512_shuffle_i32x4(a, c, 0xdd);
    t[4 + j] = _mm512_shuffle_i32x4(b, d, 0x88);
    t[12 + j] = _mm512_shuffle_i32x4(b, d, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Tokens t0 .. t0+15 of x (rows >= n are zeros) into the B layout: per 32 k, each token's 16 k
// pairs (one zmm of bf16 pairs) are transposed so every pair row gets 16 tokens in one store.
TQ_AMX void PackTokens(const float* x, int64_t n, int64_t t0, int64_t k, int64_t tb, uint16_t* hi,
                       uint16_t* lo) {
  const int valid = int(std::min<int64_t>(16, n - t0));
  for (int64_t k0 = 0; k0 < k; k0 += 32) {
    __m512i h[16], l[16];
    for (int i = 0; i < 16; ++i) {
      if (i >= valid) {
        h[i] = l[i] = _mm512_setzero_si512();
        continue;
      }
      const float* row = x + (t0 + i) * k + k0;
      const __m512 x0 = _mm512_loadu_ps(row), x1 = _mm512_loadu_ps(row + 16);
      const __m512bh b = _mm512_cvtne2ps_pbh(x1, x0);  // k0 .. k0+31 in order
      h[i] = __m512i(b);
      if (lo) {
        const __m512 h0 = _mm512_cvtpbh_ps(__m256bh(_mm512_castsi512_si256(h[i])));
        const __m512 h1 = _mm512_cvtpbh_ps(__m256bh(_mm512_extracti64x4_epi64(h[i], 1)));
        l[i] = __m512i(_mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0)));
      }
    }
    Transpose16(h);
    // token block t0 / tb, pair row k0 / 2, lane t0 % tb
    const int64_t off = ((t0 / tb) * (k / 2) + k0 / 2) * tb * 2 + (t0 % tb) * 2;
    for (int p = 0; p < 16; ++p) _mm512_store_si512(hi + off + p * tb * 2, h[p]);
    if (lo) {
      Transpose16(l);
      for (int p = 0; p < 16; ++p) _mm512_store_si512(lo + off + p * tb * 2, l[p]);
    }
  }
}

struct Scratch {
  AlignedBuffer<float> c;      // [panel rows, n_pad + 16]
  AlignedBuffer<uint16_t> w;   // [panel rows, kKb + 32]
  AlignedBuffer<float> stage;  // [16 tokens, panel rows + 16]
};

TQ_AMX void RunPanel(const Activations& a, int64_t rows, int64_t r0, int64_t count,
                     const WeightRows& w, const float* bias, float* y) {
  thread_local Scratch s;
  const int64_t n_pad = a.n_pad, k = a.k, cnt_pad = RoundUp(count, 32);
  // Row strides one cache line past a power of two, so the 16 rows of a tile do not all fall
  // into the same few L1 sets.
  const int64_t ldc = n_pad + 16, ldw = std::min(kKb, k) + 32;
  if (s.c.size() < size_t(cnt_pad * ldc)) s.c.resize(size_t(cnt_pad * ldc));
  if (s.w.size() < size_t(cnt_pad * ldw)) s.w.resize(size_t(cnt_pad * ldw));
  const int64_t tb = a.tb;
  const bool two = tb == 32;
  const BlockFn block = two ? (a.lo ? &Block<2, true> : &Block<2, false>)
                            : (a.lo ? &Block<1, true> : &Block<1, false>);
  ConfigureTiles();
  if (cnt_pad != count)  // the last panel: rows past the matrix read zeros
    std::memset(s.w.data() + count * ldw, 0, size_t((cnt_pad - count) * ldw) * 2);
  for (int64_t k0 = 0; k0 < k; k0 += kKb) {
    const int64_t kc = std::min(kKb, k - k0);
    w(r0, count, k0, kc, s.w.data(), ldw);
    for (int64_t t0 = 0; t0 < n_pad; t0 += tb) {
      const int64_t boff = ((t0 / tb) * (k / 2) + k0 / 2) * tb * 2;
      for (int64_t j = 0; j < cnt_pad; j += 32) {
        block(s.w.data() + j * ldw, ldw, a.hi + boff, a.lo ? a.lo + boff : nullptr, tb, kc / 32,
              s.c.data() + j * ldc + t0, ldc, k0 == 0);
      }
    }
  }
  _tile_release();
  // y[t, r0 + i] = c[i, t] (+ bias): per 16 tokens, 16 x 16 blocks are transposed in registers
  // into a staging buffer [16][ldst], then each token's row segment is written to y in one
  // sequential run (16 interleaved store streams 2^k bytes apart thrash L1 and stall the stores).
  const int64_t ldst = cnt_pad + 16;
  if (s.stage.size() < size_t(16 * ldst)) s.stage.resize(size_t(16 * ldst));
  for (int64_t t0 = 0; t0 < a.n; t0 += 16) {
    for (int64_t i0 = 0; i0 < cnt_pad; i0 += 16) {
      __m512i v[16];
      for (int i = 0; i < 16; ++i) v[i] = _mm512_load_si512(s.c.data() + (i0 + i) * ldc + t0);
      Transpose16(v);
      for (int t = 0; t < 16; ++t) _mm512_store_si512(s.stage.data() + t * ldst + i0, v[t]);
    }
    const int64_t nt = std::min<int64_t>(16, a.n - t0);
    for (int64_t t = 0; t < nt; ++t) {
      const float* src = s.stage.data() + t * ldst;
      float* dst = y + (t0 + t) * rows + r0;
      int64_t i = 0;
      for (; i + 16 <= count; i += 16) {
        const __m512 b = bias ? _mm512_loadu_ps(bias + r0 + i) : _mm512_setzero_ps();
        _mm512_storeu_ps(dst + i, _mm512_add_ps(_mm512_load_ps(src + i), b));
      }
      if (i < count) {
        const __mmask16 m = __mmask16((1u << (count - i)) - 1);
        const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + r0 + i) : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(dst + i, m, _mm512_add_ps(_mm512_load_ps(src + i), b));
      }
    }
  }
}

}  // namespace

Activations PrepareActivations(const float* x, int64_t n, int64_t k, bool split) {
  TQ_CHECK(Active() && n >= 1 && k % kKMultiple == 0, "amx gemm",
           "{} tokens of {} columns (needs the amx level and a multiple of 32)", n, k);
  thread_local AlignedBuffer<uint16_t> hi, lo;
  const int64_t tb = n <= 16 ? 16 : 32, n_pad = RoundUp(n, tb);
  if (hi.size() < size_t(k * n_pad)) hi.resize(size_t(k * n_pad));
  if (split && lo.size() < size_t(k * n_pad)) lo.resize(size_t(k * n_pad));
  uint16_t* h = hi.data();
  uint16_t* l = split ? lo.data() : nullptr;
  const int64_t tasks = n_pad / 16;  // 16 tokens each (pad tokens written as zeros)
  auto body = [&](int64_t task, int) { PackTokens(x, n, task * 16, k, tb, h, l); };
  if (n * k < (int64_t(1) << 16)) {
    for (int64_t t = 0; t < tasks; ++t) body(t, 0);
  } else {
    ThreadPool::Global().Run(tasks, body);
  }
  return {h, l, n, n_pad, tb, k};
}

void Gemm(const Activations& a, int64_t rows, const WeightRows& w, const float* bias, float* y) {
  TQ_CHECK(Active() && a.k % kKMultiple == 0 && rows >= 1, "amx gemm",
           "[{}, {}] weights (needs the amx level and a multiple of 32 columns)", rows, a.k);
  ThreadPool& pool = ThreadPool::Global();
  // About two panels per thread, 32..256 rows each.
  const int64_t panel = std::clamp<int64_t>(
      RoundUp((rows + 2 * pool.size() - 1) / (2 * pool.size()), 32), 32, kMaxPanel);
  const int64_t tasks = (rows + panel - 1) / panel;
  auto body = [&](int64_t task, int) {
    const int64_t r0 = task * panel;
    RunPanel(a, rows, r0, std::min(panel, rows - r0), w, bias, y);
  };
  if (tasks == 1) {
    body(0, 0);
  } else {
    pool.Run(tasks, body);
  }
}

#else  // no AMX in this build: Active() is never true

Activations PrepareActivations(const float*, int64_t, int64_t, bool) {
  Fail("amx gemm", "not built for this target");
}
void Gemm(const Activations&, int64_t, const WeightRows&, const float*, float*) {
  Fail("amx gemm", "not built for this target");
}

#endif

}  // namespace tq::kernels::cpu::amx
