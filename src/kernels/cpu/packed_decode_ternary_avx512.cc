// AVX-512 VNNI int8 decode kernel for ternary weights (base 3, 5 trits per byte; docs/FORMAT.md)
// with the codebook method (packed_decode.h).
//
// Full 160-trit chunks are taken in pairs (A, B): one zmm holds A's 32 bytes and B's 32 bytes,
// and digit k of every byte, already as the u8 lookup value 128 + centroid·127/amax, comes from
// a 256-entry table per digit (two vpermi2b + a blend on the byte's top bit, as q8): one zmm of
// 64 weights = unit k of A (bytes 0..31) and unit k of B (32..63). Each token's int8 activations
// are stored once per call in that order, so a step (pair, k) is: table lookup, vpdpbusd,
// convert, one fma with per-lane scales (A's dwords 0..7, B's 8..15; groups of 16: each lane's
// group scale comes from one vpermps of the 16 group scales from the step's first group on; the
// rows' scales, fp16 or e8, are converted to fp32 first).
// The shortened last chunk (m = cols mod 160 trits, B = ceil(m/5) bytes: column k·B + j of the
// chunk is digit k of byte j) does not line up with 32-column units, so it runs in fp32: digit
// vectors → centroids and group scales by vpermps, fma with the float activations stored in the
// same digit order.
#if defined(__x86_64__)
// GCC 12 warns about the _mm*_undefined_* inside its own intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/cpu/packed_decode.h"

#define TQ_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c,bmi2")))
#define TQ_AVX512_INLINE TQ_AVX512 inline __attribute__((always_inline))

namespace tq::kernels::cpu::isa {
namespace {

constexpr int kChunk = 160;  // trits per full chunk (32 bytes)
constexpr int kPow3[5] = {1, 3, 9, 27, 81};

// Column (within the chunk pair, 0..319) of zmm byte p of digit k.
constexpr int PairCol(int k, int p) { return (p >> 5) * kChunk + 32 * k + (p & 31); }

// The shape of one call: full chunks, pairs, the tail chunk.
struct Shape {
  int64_t cols, g, groups;
  int64_t full;     // full chunks
  int64_t pairs;    // ceil(full / 2); the last pair may lack chunk B
  int64_t steps;    // 5 · pairs
  int64_t tail_m;   // trits of the shortened last chunk (0: none)
  int64_t tail_b;   // its bytes, ceil(tail_m / 5)
  int64_t tail_g0;  // first group the tail touches
};

Shape MakeShape(const PackedMatrix& w) {
  Shape s;
  s.cols = w.cols;
  s.g = w.group_size;
  s.groups = w.cols / w.group_size;
  s.full = w.cols / kChunk;
  s.pairs = (s.full + 1) / 2;
  s.steps = 5 * s.pairs;
  s.tail_m = w.cols % kChunk;
  s.tail_b = (s.tail_m + 4) / 5;
  s.tail_g0 = s.full * kChunk / s.g;
  return s;
}

// One token's prepared data: xq int8 [steps, 64], bias int32 [steps, 16] (-128·Σ of each dword's
// bytes), xs float [steps, 16] (activation scale per dword lane), tail float [5, 32] (digit k,
// byte j: x at chunk column k·B + j, 0 past the tail).
struct TokenView {
  const int8_t* xq;
  const int32_t* bias;
  const float* xs;
  const float* tail;
};

int64_t TokenFloats(const Shape& s) { return s.steps * 48 + 160; }

void PrepareToken(const float* x, const Shape& sh, float* base, TokenView* tv) {
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* bias = reinterpret_cast<int32_t*>(base + sh.steps * 16);
  float* xs = base + sh.steps * 32;
  float* tail = base + sh.steps * 48;
  const int64_t full_cols = sh.full * kChunk;
  for (int64_t pr = 0; pr < sh.pairs; ++pr) {
    const int64_t c0 = pr * 2 * kChunk;
    for (int k = 0; k < 5; ++k) {
      const int64_t s = pr * 5 + k;
      float inv[2], scale[2];
      for (int h = 0; h < 2; ++h) {  // unit k of chunk A (h = 0) and of chunk B (h = 1)
        const int64_t u0 = c0 + h * kChunk + 32 * k;
        float amax = 0.0f;
        if (u0 < full_cols)
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[u0 + j]));
        scale[h] = amax / 127.0f;
        inv[h] = amax > 0.0f ? 127.0f / amax : 0.0f;
      }
      int8_t* q = xq + s * 64;
      for (int p = 0; p < 64; ++p) {
        const int64_t c = c0 + PairCol(k, p);
        q[p] = c < full_cols ? int8_t(std::lrintf(x[c] * inv[p >> 5])) : 0;
      }
      for (int i = 0; i < 16; ++i) {
        bias[s * 16 + i] = -128 * (q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3]);
        xs[s * 16 + i] = scale[i >> 3];
      }
    }
  }
  for (int k = 0; k < 5; ++k)
    for (int j = 0; j < 32; ++j) {
      const int64_t c = k * sh.tail_b + j;
      tail[k * 32 + j] = j < sh.tail_b && c < sh.tail_m ? x[full_cols + c] : 0.0f;
    }
  *tv = {xq, bias, xs, tail};
}

// Per call (shared by all rows and tokens): the u8 lookup tables, the group of each step's A and
// B unit, the tail's per-lane group offsets.
struct Ctx {
  const PackedMatrix* w;
  Shape sh;
  alignas(64) uint8_t lut[5][256];     // digit k of byte q → 128 + centroid · 127 / amax
  float cb_scale;                      // centroid = (table - 128) · cb_scale
  __m512 cb;                           // float codebook in lanes 0..2 (tail)
  const int32_t* step_group;           // [steps]: group of the step's first column (unit k of A)
  const int32_t* lane_group;           // [steps, 16]: group of each dword lane - step_group
  alignas(64) int32_t tail_gi[5][32];  // digit k, byte j → group - tail_g0 (0..15)
};

TQ_AVX512_INLINE __m512i Trits(__m512i q16, int k) {
  return _mm512_mulhi_epu16(_mm512_mullo_epi16(q16, _mm512_set1_epi16(short(kPow3[k] * 256))),
                            _mm512_set1_epi16(3));
}

// y[t · ystride + r] for rows r0 .. r0+R-1 and N tokens (without bias).
// kE8Direct (e8 scales, groups of 32): a step broadcasts its two scales straight from the table
// (no fp32 row buffer except for the shortened last chunk; e8/fp16 hot 0.91 → 0.95; with larger
// groups the buffer's few gathers cost less than the extra loads per step).
template <bool kG16, bool kE8Direct, int R, int N>
TQ_AVX512 void Rows(const Ctx& c, int64_t r0, const TokenView* tv, float* y, int64_t ystride,
                    float* wsf) {
  const PackedMatrix& w = *c.w;
  const Shape& sh = c.sh;
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    const int64_t i0 = (r0 + r) * sh.groups;
    float* dst = wsf + r * sh.groups;
    const int64_t j0 = kE8Direct ? (sh.tail_m > 0 ? sh.tail_g0 : sh.groups) : 0;
    for (int64_t j = j0; j < sh.groups; j += 16) {
      const __mmask16 m = __mmask16(sh.groups - j >= 16 ? 0xFFFF : (1u << (sh.groups - j)) - 1);
      __m512 v;
      if (w.scale_codes != nullptr) {  // e8: 16 codes → one gather from the table
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, w.scale_codes + i0 + j));
        v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, w.scale_table, 4);
      } else {
        v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w.scales + i0 + j));
      }
      _mm512_mask_storeu_ps(dst + j, m, v);
    }
  }
  for (int64_t pr = 0; pr < sh.pairs; ++pr) {
    const __mmask64 load = 2 * pr + 1 < sh.full ? ~__mmask64(0) : __mmask64(0xFFFFFFFFull);
    __m512i q[R];
    for (int r = 0; r < R; ++r)
      q[r] = _mm512_maskz_loadu_epi8(load, w.codes + (r0 + r) * w.row_bytes + pr * 64);
    __mmask64 top[R];  // bytes >= 128 take the upper half of the table
    for (int r = 0; r < R; ++r) top[r] = _mm512_movepi8_mask(q[r]);
    for (int k = 0; k < 5; ++k) {
      const int64_t s = pr * 5 + k;
      const __m512i t0 = _mm512_load_si512(c.lut[k]), t1 = _mm512_load_si512(c.lut[k] + 64);
      const __m512i t2 = _mm512_load_si512(c.lut[k] + 128), t3 = _mm512_load_si512(c.lut[k] + 192);
      // kG16: a vpermps of the 16 scales from the step's first group; else A's unit and B's
      // unit are one group each (two broadcasts and a blend: cheaper on port 5).
      const __m512i lg = kG16 ? _mm512_load_si512(c.lane_group + s * 16) : _mm512_setzero_si512();
      const int64_t ga = c.step_group[s], gb = ga + c.lane_group[s * 16 + 8];
      for (int r = 0; r < R; ++r) {
        const __m512i wv = _mm512_mask_blend_epi8(top[r], _mm512_permutex2var_epi8(t0, q[r], t1),
                                                  _mm512_permutex2var_epi8(t2, q[r], t3));
        const float* ws = wsf + r * sh.groups;
        const uint8_t* sq = kE8Direct ? w.scale_codes + (r0 + r) * sh.groups : nullptr;
        __m512 wsv;
        if constexpr (kG16) {
          wsv = _mm512_permutexvar_ps(lg, _mm512_loadu_ps(ws + ga));
        } else if constexpr (kE8Direct) {
          wsv = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(w.scale_table[sq[ga]]),
                                     _mm512_set1_ps(w.scale_table[sq[gb]]));
        } else {
          wsv = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(ws[ga]), _mm512_set1_ps(ws[gb]));
        }
        for (int t = 0; t < N; ++t) {
          const __m512i d = _mm512_dpbusd_epi32(_mm512_load_si512(tv[t].bias + s * 16), wv,
                                                _mm512_load_si512(tv[t].xq + s * 64));
          acc[r][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(d),
                              _mm512_mul_ps(_mm512_load_ps(tv[t].xs + s * 16), wsv), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    __m512 tail[N];
    for (int t = 0; t < N; ++t) tail[t] = _mm512_setzero_ps();
    if (sh.tail_m > 0) {
      const uint8_t* p = w.codes + (r0 + r) * w.row_bytes + sh.full * 32;
      const __m512i q16 =
          _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(__mmask32((1ull << sh.tail_b) - 1), p));
      // The tail's groups (at most 10 for m < 160, g >= 16) as floats in lanes 0..15.
      const float* ws = wsf + r * sh.groups + sh.tail_g0;
      const int64_t ng = std::min<int64_t>(16, sh.groups - sh.tail_g0);
      const __m512 gs = _mm512_maskz_loadu_ps(__mmask16((1u << ng) - 1), ws);
      for (int k = 0; k < 5; ++k) {
        const __m512i tk = Trits(q16, k);
        for (int h = 0; h < 2; ++h) {
          const __m512i idx = _mm512_cvtepu16_epi32(h == 0 ? _mm512_castsi512_si256(tk)
                                                           : _mm512_extracti64x4_epi64(tk, 1));
          const __m512 wf =
              _mm512_mul_ps(_mm512_permutexvar_ps(idx, c.cb),
                            _mm512_permutexvar_ps(_mm512_load_si512(&c.tail_gi[k][16 * h]), gs));
          for (int t = 0; t < N; ++t)
            tail[t] = _mm512_fmadd_ps(wf, _mm512_load_ps(tv[t].tail + k * 32 + 16 * h), tail[t]);
        }
      }
    }
    for (int t = 0; t < N; ++t)
      y[t * ystride + r] =
          _mm512_reduce_add_ps(acc[r][t]) * c.cb_scale + _mm512_reduce_add_ps(tail[t]);
  }
}

template <bool kG16, bool kE8Direct, int R>
TQ_AVX512 void RowsAllTokens(const Ctx& c, int64_t r0, const TokenView* tv, int64_t n, float* y,
                             int64_t ystride, float* wsf) {
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const TokenView* tp = tv + t0;
    float* yp = y + t0 * ystride + r0;
    switch (std::min<int64_t>(4, n - t0)) {
      case 1:
        Rows<kG16, kE8Direct, R, 1>(c, r0, tp, yp, ystride, wsf);
        break;
      case 2:
        Rows<kG16, kE8Direct, R, 2>(c, r0, tp, yp, ystride, wsf);
        break;
      case 3:
        Rows<kG16, kE8Direct, R, 3>(c, r0, tp, yp, ystride, wsf);
        break;
      default:
        Rows<kG16, kE8Direct, R, 4>(c, r0, tp, yp, ystride, wsf);
        break;
    }
  }
}

}  // namespace

bool Avx512TernarySupports(const PackedMatrix& w) {
  return w.format == quant::CodeFormat::kTernary && w.method == quant::QuantMethod::kCodebook &&
         w.cols % 32 == 0 && w.group_size % 16 == 0;
}

TQ_AVX512 void Avx512TernaryDecode(const float* x, int64_t n, const PackedMatrix& w,
                                   const float* bias, float* y) {
  const Shape sh = MakeShape(w);
  Ctx c;
  c.w = &w;
  c.sh = sh;
  float amax = 0.0f;
  for (int i = 0; i < 3; ++i) amax = std::max(amax, std::fabs(w.codebook[i]));
  const float s = amax > 0.0f ? 127.0f / amax : 0.0f;
  c.cb_scale = amax > 0.0f ? amax / 127.0f : 0.0f;
  uint8_t tab[3];
  for (int i = 0; i < 3; ++i) tab[i] = uint8_t(128 + std::lrintf(w.codebook[i] * s));
  for (int k = 0; k < 5; ++k)
    for (int q = 0; q < 256; ++q) {
      const int t = ((uint8_t(q * kPow3[k]) * 3) >> 8);  // docs/FORMAT.md digit k
      c.lut[k][q] = tab[t];
    }
  alignas(64) float cbf[16] = {w.codebook[0], w.codebook[1], w.codebook[2]};
  c.cb = _mm512_load_ps(cbf);
  for (int k = 0; k < 5; ++k)
    for (int j = 0; j < 32; ++j) {
      const int64_t col = sh.full * kChunk + k * sh.tail_b + j;
      c.tail_gi[k][j] =
          j < sh.tail_b && k * sh.tail_b + j < sh.tail_m ? int32_t(col / sh.g - sh.tail_g0) : 0;
    }
  // Per-call scratch (the calling thread): prepared tokens and the step → group tables. A lane
  // past the row's full chunks (a missing chunk B) is clamped to the last column: its
  // activations are 0, and the clamp keeps its group inside the row (16 groups from the step's
  // first one cover A's and B's units: (160 + 63) / 16 + 1 <= 15).
  const int64_t per_token = TokenFloats(sh);
  thread_local AlignedBuffer<float> buf;
  thread_local AlignedBuffer<int32_t> groups;
  if (buf.size() < size_t(per_token * n)) buf.resize(size_t(per_token * n));
  if (groups.size() < size_t(17 * sh.steps)) groups.resize(size_t(17 * sh.steps));
  int32_t* lane_group = groups.data();  // [steps, 16], 64-byte aligned
  int32_t* step_group = groups.data() + 16 * sh.steps;
  for (int64_t st = 0; st < sh.steps; ++st) {
    const int64_t pr = st / 5, k = st % 5;
    const int64_t first = std::min(sh.cols - 1, 2 * pr * kChunk + 32 * k) / sh.g;
    step_group[st] = int32_t(first);
    for (int i = 0; i < 16; ++i) {
      const int64_t col = std::min(sh.cols - 1, (2 * pr + i / 8) * kChunk + 32 * k + 4 * (i % 8));
      lane_group[st * 16 + i] = int32_t(col / sh.g - first);
    }
  }
  c.step_group = step_group;
  c.lane_group = lane_group;
  TokenView tv[kFastDecodeMaxTokens];
  for (int64_t i = 0; i < n; ++i)
    PrepareToken(x + i * w.cols, sh, buf.data() + i * per_token, &tv[i]);
  const int64_t rows = w.rows;
  auto body = [&](int64_t b, int64_t e) {
    thread_local AlignedBuffer<float> wsf;  // the 4 rows' group scales as fp32 (+16 read past)
    if (wsf.size() < size_t(4 * sh.groups + 16)) {
      wsf.resize(size_t(4 * sh.groups + 16));
      std::fill(wsf.data(), wsf.data() + wsf.size(), 0.0f);
    }
    int64_t r = b;
    if (sh.g % 32 != 0) {  // 16, 48, ...: a unit spans two groups
      for (; r + 4 <= e; r += 4) RowsAllTokens<true, false, 4>(c, r, tv, n, y, rows, wsf.data());
      for (; r < e; ++r) RowsAllTokens<true, false, 1>(c, r, tv, n, y, rows, wsf.data());
    } else if (w.scale_codes != nullptr && sh.g == 32) {  // measured: direct wins at g32 only
      for (; r + 4 <= e; r += 4) RowsAllTokens<false, true, 4>(c, r, tv, n, y, rows, wsf.data());
      for (; r < e; ++r) RowsAllTokens<false, true, 1>(c, r, tv, n, y, rows, wsf.data());
    } else {
      for (; r + 4 <= e; r += 4) RowsAllTokens<false, false, 4>(c, r, tv, n, y, rows, wsf.data());
      for (; r < e; ++r) RowsAllTokens<false, false, 1>(c, r, tv, n, y, rows, wsf.data());
    }
    if (bias != nullptr)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = b; k < e; ++k) y[i * rows + k] += bias[k];
  };
  ForRowBlocks(rows, w.cols, body);
}

}  // namespace tq::kernels::cpu::isa

#else  // not x86-64

#include "kernels/cpu/packed_decode.h"

namespace tq::kernels::cpu::isa {
bool Avx512TernarySupports(const PackedMatrix&) { return false; }
void Avx512TernaryDecode(const float*, int64_t, const PackedMatrix&, const float*, float*) {}
}  // namespace tq::kernels::cpu::isa

#endif
