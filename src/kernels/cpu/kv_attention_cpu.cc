// Attention on a compressed KV cache (kernels/kv_ops.h), cpu backend: flash style over key blocks
// (kv_attention_body.inc), with an AVX-512 build of the whole task (codes decoded by a 16-entry
// register lookup, vpermps, for 2-4 bits and by a convert for the uniform 8-bit tier) and a
// portable build for other CPUs. Parallel over (kv head, block of query rows). The QJL sketch
// term of coded keys (kv_ops.h) is a masked sum: each 16 sign bits are one AVX-512 mask.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/kv_ops.h"

namespace tq::kernels {
namespace {

constexpr int64_t kKeyBlock = 64;
constexpr int64_t kQueryBlock = 16;

// Codebooks padded to 16 floats per segment (the lookup table of one vpermps).
struct SegmentTable {
  alignas(64) float levels[16] = {};
  bool lookup = false;  // 2-4 bits
};
// Position (0..63) within a 64-code step of the code at zmm byte p.
constexpr int StepPosToCode(quant::CodeFormat f, int p) {
  const int lane = p >> 4, b = p & 15;
  if (f == quant::CodeFormat::kQ4) return (lane & 1) * 32 + (lane >> 1) * 16 + b;
  if (f == quant::CodeFormat::kQ2 || f == quant::CodeFormat::kQ3)
    return (b >> 3) * 32 + 8 * lane + (b & 7);
  return p;  // q8
}

// Int8 form of a key format: set up once per call (FillKeyInt8).
struct KeyInt8 {
  bool ok = false;
  quant::CodeFormat format = quant::CodeFormat::kQ8;
  bool uniform = false;
  int64_t step_bytes = 0;              // packed bytes of 64 codes
  alignas(16) uint8_t table[16] = {};  // round(level / level_step) + 128
  float level_step = 0, lo = 0, step = 0;
};

// The query rows quantized for one task: bytes [rows, d] in step order, and per row the
// factors of the score formula above (kmul: qs·ls or qs·step; kadd: qs·lo·Σq; bias: -128Σq or 0).
struct QueryInt8 {
  int8_t* q;
  float* kmul;
  float* kadd;
  int32_t* bias;
};

void QuantizeQueries(const KeyInt8& kf, const float* qr, int64_t rows, int64_t d,
                     const QueryInt8& out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = qr + r * d;
    float amax = 0;
    for (int64_t j = 0; j < d; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float qs = amax > 0 ? amax / 127.0f : 1.0f, inv = 1.0f / qs;
    int32_t sum = 0;
    int8_t* dst = out.q + r * d;
    for (int64_t s0 = 0; s0 < d; s0 += 64)
      for (int p = 0; p < 64; ++p) {
        const int v = int(std::lrint(x[s0 + StepPosToCode(kf.format, p)] * inv));
        dst[s0 + p] = int8_t(v);
        sum += v;
      }
    out.kmul[r] = qs * (kf.uniform ? kf.step : kf.level_step);
    out.kadd[r] = kf.uniform ? qs * kf.lo * float(sum) : 0.0f;
    out.bias[r] = kf.uniform ? 0 : -128 * sum;
  }
}

struct Tables {
  SegmentTable k[2], v[2];
  bool fast = false;      // every segment and scale group a whole number of 32-code units
  KeyInt8 kint8;          // int8 key scoring (kv_attention_int8.inc), when ok
  bool qjl_int8 = false;  // QJL sketch terms by VNNI (kv_attention_int8.inc: ScoreQjlInt8)
};

// S q' of the query rows quantized for the int8 QJL term: q [rows, m] (absmax / 127), the step
// qs and Σ_j q_j per row; ok when the hooks took it (PrepareQjl).
struct QjlInt8 {
  int8_t* q;
  float* qs;
  int32_t* qsum;
  bool ok = false;
};

// $TQ_KV_INT8=0 starts with int8 scoring off (measurements of its effect on quality and speed).
std::atomic<bool> g_int8_scoring{[] {
  const char* env = std::getenv("TQ_KV_INT8");
  return !(env && std::string_view(env) == "0");
}()};

// Int8 scoring applies to one-segment, one-scale keys of 64..256 channels (a multiple of 64),
// 2-4 bits (lookup) or 8 bits (uniform).
KeyInt8 FillKeyInt8(const KvCodeFormat& f) {
  KeyInt8 k;
  if (f.num_segments != 1 || f.groups() != 1 || f.dim % 64 != 0 || f.dim > 256) return k;
  const KvCodeSegment& seg = f.segments[0];
  const int levels = quant::Traits(seg.format).levels;
  k.format = seg.format;
  k.step_bytes = 2 * int64_t(quant::Traits(seg.format).bytes_per_unit);
  if (seg.uniform && seg.format == quant::CodeFormat::kQ8) {
    k.uniform = true;
    k.lo = seg.lo;
    k.step = seg.step;
  } else if (levels <= 16 && seg.format != quant::CodeFormat::kQ1) {  // ExpandStep: 2-4 bits
    float amax = 0;
    for (int c = 0; c < levels; ++c) amax = std::max(amax, std::fabs(seg.levels[c]));
    if (amax <= 0) return k;
    k.level_step = amax / 127.0f;
    for (int c = 0; c < levels; ++c)
      k.table[c] = uint8_t(std::lrint(seg.levels[c] / k.level_step) + 128);
  } else {
    return k;
  }
  k.ok = true;
  return k;
}

bool FastLayout(const KvCodeFormat& f) {
  if (f.group % 32 != 0) return false;
  for (int s = 0; s < f.num_segments; ++s)
    if ((f.segments[s].end - f.segments[s].begin) % 32 != 0) return false;
  return true;
}

void FillTables(const KvCodeFormat& f, SegmentTable* t) {
  for (int s = 0; s < f.num_segments; ++s) {
    const int levels = quant::Traits(f.segments[s].format).levels;
    t[s].lookup = levels <= 16;
    if (t[s].lookup) std::copy_n(f.segments[s].levels, levels, t[s].levels);
  }
}

namespace generic {

inline float Dot(const float* a, const float* b, int64_t d) {
  float s = 0;
  for (int64_t j = 0; j < d; ++j) s += a[j] * b[j];
  return s;
}
inline void Axpy(float a, const float* x, float* y, int64_t d) {
  for (int64_t j = 0; j < d; ++j) y[j] += a * x[j];
}
inline void ScaleRow(float* y, float a, int64_t d) {
  for (int64_t j = 0; j < d; ++j) y[j] *= a;
}
inline void F16Row(const uint16_t* src, float* dst, int64_t n) { F16ToF32(src, dst, size_t(n)); }
inline bool FastBlock(const float*, int64_t, const float*, const float*, int64_t, int64_t, float*,
                      float*, float*, float*) {
  return false;
}
inline void DecodeCoded(const KvCodeFormat& f, const SegmentTable*, const uint8_t* codes,
                        const uint16_t* scales, float* out) {
  DecodeKvVector(f, codes, scales, out);
}
inline bool PrepareQueries(const Tables&, const float*, int64_t, int64_t, const QueryInt8&) {
  return false;
}
inline bool ScoreCoded(const Tables&, const QueryInt8&, int64_t, int64_t, int64_t, const uint8_t*,
                       const uint16_t*, int64_t, float*) {
  return false;
}
inline void ScoreBlock(const float* qr, int64_t rows, const float* kbuf, int64_t nt, int64_t d,
                       float* s) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < nt; ++t) s[r * kKeyBlock + t] = Dot(qr + r * d, kbuf + t * d, d);
}
inline void ScoredBlock(int64_t rows, const float* vbuf, int64_t nt, int64_t d, float* acc,
                        float* m, float* l, float* s) {
  for (int64_t r = 0; r < rows; ++r) {
    float* e = s + r * kKeyBlock;
    float mx = -INFINITY;
    for (int64_t t = 0; t < nt; ++t) mx = std::max(mx, e[t]);
    if (mx > m[r]) {
      const float corr = std::exp(m[r] - mx);  // 0 on the first block
      l[r] *= corr;
      ScaleRow(acc + r * d, corr, d);
      m[r] = mx;
    }
    for (int64_t t = 0; t < nt; ++t) {
      const float w = std::exp(e[t] - m[r]);
      l[r] += w;
      Axpy(w, vbuf + t * d, acc + r * d, d);
    }
  }
}
inline float SignDot(const float* sq, float, const uint8_t* bits, int64_t m) {
  return float(QjlSignDot(sq, bits, m));
}
inline bool PrepareQjl(const Tables&, const float*, int64_t, int64_t, QjlInt8*) { return false; }
inline void AddQjlBlock(int64_t rows, const float* sq, const float* sq_sum, int64_t m,
                        const uint8_t* bits, const uint16_t* norms, int64_t nt, float factor,
                        const QjlInt8&, float* s) {
  const int64_t sb = QjlSignBytes(m);
  for (int64_t t = 0; t < nt; ++t) {
    const float w = F16ToF32(norms[t]) * factor;
    for (int64_t r = 0; r < rows; ++r)
      s[r * kKeyBlock + t] += w * SignDot(sq + r * m, sq_sum[r], bits + t * sb, m);
  }
}

#include "kernels/cpu/kv_attention_body.inc"

}  // namespace generic

#if defined(__x86_64__)
#pragma GCC push_options
// GCC 12 false positive on the undefined "__Y" operands inside the AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2,bmi2")
namespace avx512 {

inline float Dot(const float* a, const float* b, int64_t d) {
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= d; j += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), acc);
  float s = _mm512_reduce_add_ps(acc);
  for (; j < d; ++j) s += a[j] * b[j];
  return s;
}
inline void Axpy(float a, const float* x, float* y, int64_t d) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t j = 0;
  for (; j + 16 <= d; j += 16)
    _mm512_storeu_ps(y + j, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + j), _mm512_loadu_ps(y + j)));
  for (; j < d; ++j) y[j] += a * x[j];
}
inline void ScaleRow(float* y, float a, int64_t d) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) _mm512_storeu_ps(y + j, _mm512_mul_ps(va, _mm512_loadu_ps(y + j)));
  for (; j < d; ++j) y[j] *= a;
}
inline void F16Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(
        dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  for (; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

// The 32 codes of one packed unit (quant/format.h layouts) as two vectors of 16 indices.
inline void UnpackQ2(const uint8_t* u, __m512i* lo, __m512i* hi) {
  // qs[j] = c[j] | c[j+8] << 2 | c[j+16] << 4 | c[j+24] << 6, j < 8.
  uint64_t w;
  std::memcpy(&w, u, 8);
  const __m512i b = _mm512_cvtepu8_epi32(_mm_set1_epi64x(int64_t(w)));  // qs[0..7] twice
  const __m512i sh_lo = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i sh_hi = _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m512i three = _mm512_set1_epi32(3);
  *lo = _mm512_and_si512(_mm512_srlv_epi32(b, sh_lo), three);
  *hi = _mm512_and_si512(_mm512_srlv_epi32(b, sh_hi), three);
}

inline void UnpackUnit(quant::CodeFormat fmt, const uint8_t* u, __m512i* lo, __m512i* hi) {
  switch (fmt) {
    case quant::CodeFormat::kQ4: {  // qs[j] = c[j] | c[j+16] << 4
      const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u)));
      *lo = _mm512_and_si512(b, _mm512_set1_epi32(15));
      *hi = _mm512_srli_epi32(b, 4);
      return;
    }
    case quant::CodeFormat::kQ3: {  // 2-bit plane (as q2) + bit 2 of c[j] at bit j of a uint32
      UnpackQ2(u, lo, hi);
      uint32_t bits;
      std::memcpy(&bits, u + 8, 4);
      const __m512i hb = _mm512_set1_epi32(int(bits));
      const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
      const __m512i one = _mm512_set1_epi32(1);
      const __m512i h0 = _mm512_and_si512(_mm512_srlv_epi32(hb, lane), one);
      const __m512i h1 = _mm512_and_si512(
          _mm512_srlv_epi32(hb, _mm512_add_epi32(lane, _mm512_set1_epi32(16))), one);
      *lo = _mm512_or_si512(*lo, _mm512_slli_epi32(h0, 2));
      *hi = _mm512_or_si512(*hi, _mm512_slli_epi32(h1, 2));
      return;
    }
    case quant::CodeFormat::kQ2:
      UnpackQ2(u, lo, hi);
      return;
    case quant::CodeFormat::kQ1: {  // bit j of a uint32 = c[j]
      uint32_t bits;
      std::memcpy(&bits, u, 4);
      const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
      const __m512i one = _mm512_set1_epi32(1);
      *lo = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(int(bits)), lane), one);
      *hi = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(int(bits >> 16)), lane), one);
      return;
    }
    default: {  // kQ8: qs[j] = c[j]
      *lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u)));
      *hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 16)));
      return;
    }
  }
}

inline void DecodeCoded(const KvCodeFormat& f, const SegmentTable* tables, const uint8_t* codes,
                        const uint16_t* scales, float* out) {
  for (int s = 0; s < f.num_segments; ++s) {
    const KvCodeSegment& seg = f.segments[s];
    const int64_t unit_bytes = quant::Traits(seg.format).bytes_per_unit;
    const uint8_t* u = codes + seg.byte_offset;
    const __m512 table = _mm512_load_ps(tables[s].levels);
    for (int64_t c = seg.begin; c < seg.end; c += 32, u += unit_bytes) {
      const __m512 sc = _mm512_set1_ps(F16ToF32(scales[c / f.group]));
      __m512i lo, hi;
      UnpackUnit(seg.format, u, &lo, &hi);
      __m512 a, b;
      if (tables[s].lookup) {
        a = _mm512_permutexvar_ps(lo, table);
        b = _mm512_permutexvar_ps(hi, table);
      } else {  // uniform levels: lo + step * code
        const __m512 base = _mm512_set1_ps(seg.lo), step = _mm512_set1_ps(seg.step);
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), step, base);
        b = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), step, base);
      }
      _mm512_storeu_ps(out + c, _mm512_mul_ps(a, sc));
      _mm512_storeu_ps(out + c + 16, _mm512_mul_ps(b, sc));
    }
  }
}

// exp(x) for x <= 0 (scores minus their running max), Cephes' expf polynomial: ~1 ulp.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// R rows of rotated queries q [R, 16 NC] against nt keys k [nt, 16 NC]: s[r * kKeyBlock + t].
// Each key is loaded once for the R rows.
template <int NC, int R>
inline void Scores(const float* q, const float* k, int64_t nt, float* s) {
  __m512 qv[R][NC];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) qv[r][c] = _mm512_loadu_ps(q + r * 16 * NC + 16 * c);
  for (int64_t t = 0; t < nt; ++t) {
    __m512 kv[NC];
    for (int c = 0; c < NC; ++c) kv[c] = _mm512_loadu_ps(k + t * 16 * NC + 16 * c);
    for (int r = 0; r < R; ++r) {
      __m512 a = _mm512_mul_ps(qv[r][0], kv[0]);
      for (int c = 1; c < NC; ++c) a = _mm512_fmadd_ps(qv[r][c], kv[c], a);
      s[r * kKeyBlock + t] = _mm512_reduce_add_ps(a);
    }
  }
}

// acc [R, 16 NC] += Σ_t e[r * kKeyBlock + t] v_t, the accumulators held in registers.
template <int NC, int R>
inline void Accumulate(const float* e, const float* v, int64_t nt, float* acc) {
  __m512 a[R][NC];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) a[r][c] = _mm512_loadu_ps(acc + r * 16 * NC + 16 * c);
  for (int64_t t = 0; t < nt; ++t) {
    __m512 vv[NC];
    for (int c = 0; c < NC; ++c) vv[c] = _mm512_loadu_ps(v + t * 16 * NC + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 w = _mm512_set1_ps(e[r * kKeyBlock + t]);
      for (int c = 0; c < NC; ++c) a[r][c] = _mm512_fmadd_ps(w, vv[c], a[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(acc + r * 16 * NC + 16 * c, a[r][c]);
}

// Online softmax over one block for rows whose scores are in s: scores become weights, m, l and
// the accumulators are updated.
inline void SoftmaxRow(float* s, int64_t nt, float* m, float* l, float* acc, int64_t d) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  int64_t t = 0;
  for (; t + 16 <= nt; t += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + t));
  float bm = _mm512_reduce_max_ps(mx);
  for (; t < nt; ++t) bm = std::max(bm, s[t]);
  if (bm > *m) {
    const float corr = std::exp(*m - bm);  // 0 on the first block
    *l *= corr;
    ScaleRow(acc, corr, d);
    *m = bm;
  }
  const __m512 mv = _mm512_set1_ps(*m);
  __m512 sum = _mm512_setzero_ps();
  for (t = 0; t < nt; t += 16) {
    const __mmask16 mask = nt - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (nt - t)) - 1);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + t), mv));
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, e));
    _mm512_mask_storeu_ps(s + t, mask, e);
  }
  *l += _mm512_reduce_add_ps(sum);
}

template <int NC, int R>
inline void FastBlockT(const float* qr, int64_t rows, const float* kbuf, const float* vbuf,
                       int64_t nt, float* acc, float* m, float* l, float* s) {
  constexpr int64_t d = 16 * NC;
  int64_t r = 0;
  for (; r + R <= rows; r += R) {
    Scores<NC, R>(qr + r * d, kbuf, nt, s + r * kKeyBlock);
    for (int j = 0; j < R; ++j)
      SoftmaxRow(s + (r + j) * kKeyBlock, nt, m + r + j, l + r + j, acc + (r + j) * d, d);
    Accumulate<NC, R>(s + r * kKeyBlock, vbuf, nt, acc + r * d);
  }
  for (; r < rows; ++r) {
    Scores<NC, 1>(qr + r * d, kbuf, nt, s + r * kKeyBlock);
    SoftmaxRow(s + r * kKeyBlock, nt, m + r, l + r, acc + r * d, d);
    Accumulate<NC, 1>(s + r * kKeyBlock, vbuf, nt, acc + r * d);
  }
}

inline bool FastBlock(const float* qr, int64_t rows, const float* kbuf, const float* vbuf,
                      int64_t nt, int64_t d, float* acc, float* m, float* l, float* s) {
  switch (d) {
    case 64:
      FastBlockT<4, 4>(qr, rows, kbuf, vbuf, nt, acc, m, l, s);
      return true;
    case 128:
      FastBlockT<8, 2>(qr, rows, kbuf, vbuf, nt, acc, m, l, s);
      return true;
    default:
      return false;
  }
}

template <int NC, int R>
inline void ScoredBlockT(int64_t rows, const float* vbuf, int64_t nt, float* acc, float* m,
                         float* l, float* s) {
  constexpr int64_t d = 16 * NC;
  int64_t r = 0;
  for (; r + R <= rows; r += R) {
    for (int j = 0; j < R; ++j)
      SoftmaxRow(s + (r + j) * kKeyBlock, nt, m + r + j, l + r + j, acc + (r + j) * d, d);
    Accumulate<NC, R>(s + r * kKeyBlock, vbuf, nt, acc + r * d);
  }
  for (; r < rows; ++r) {
    SoftmaxRow(s + r * kKeyBlock, nt, m + r, l + r, acc + r * d, d);
    Accumulate<NC, 1>(s + r * kKeyBlock, vbuf, nt, acc + r * d);
  }
}

// Softmax and value accumulation of a block whose scores s [rows, kKeyBlock] are given.
inline void ScoredBlock(int64_t rows, const float* vbuf, int64_t nt, int64_t d, float* acc,
                        float* m, float* l, float* s) {
  switch (d) {
    case 64:
      return ScoredBlockT<4, 4>(rows, vbuf, nt, acc, m, l, s);
    case 128:
      return ScoredBlockT<8, 2>(rows, vbuf, nt, acc, m, l, s);
    default:
      for (int64_t r = 0; r < rows; ++r) {
        float* e = s + r * kKeyBlock;
        SoftmaxRow(e, nt, m + r, l + r, acc + r * d, d);
        for (int64_t t = 0; t < nt; ++t) Axpy(e[t], vbuf + t * d, acc + r * d, d);
      }
  }
}

// fp32 scores s [rows, kKeyBlock] of a block of decoded keys.
inline void ScoreBlock(const float* qr, int64_t rows, const float* kbuf, int64_t nt, int64_t d,
                       float* s) {
  int64_t r = 0;
  if (d == 64) {
    for (; r + 4 <= rows; r += 4) Scores<4, 4>(qr + r * d, kbuf, nt, s + r * kKeyBlock);
  } else if (d == 128) {
    for (; r + 2 <= rows; r += 2) Scores<8, 2>(qr + r * d, kbuf, nt, s + r * kKeyBlock);
  }
  for (; r < rows; ++r)
    for (int64_t t = 0; t < nt; ++t) s[r * kKeyBlock + t] = Dot(qr + r * d, kbuf + t * d, d);
}

// ⟨sq, sign⟩ = 2 Σ_{bits set} sq_j - Σ_j sq_j: the sign bits of 16 channels are one mask.
inline float SignDot(const float* sq, float sq_sum, const uint8_t* bits, int64_t m) {
  __m512 a = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= m; j += 16) {
    uint16_t mask;
    std::memcpy(&mask, bits + j / 8, 2);
    a = _mm512_mask_add_ps(a, __mmask16(mask), a, _mm512_loadu_ps(sq + j));
  }
  float set = _mm512_reduce_add_ps(a);
  for (; j < m; ++j) set += (bits[j >> 3] >> (j & 7) & 1) ? sq[j] : 0.0f;
  return 2.0f * set - sq_sum;
}

inline __m512 Lo64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 Hi64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// Sixteen float vectors -> one vector of their horizontal sums, lane t = Σ v[t] (the shuffle
// tree of ReduceSixteen in kv_attention_int8.inc, in floats).
inline __m512 ReduceSixteenPs(const __m512* v) {
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44),
                         _mm512_shuffle_f32x4(v[i], v[i + 8], 0xEE));
  for (int i = 0; i < 4; ++i)
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[i], w[i + 4], 0x88),
                         _mm512_shuffle_f32x4(w[i], w[i + 4], 0xDD));
  for (int i = 0; i < 2; ++i) y[i] = _mm512_add_ps(Lo64(x[i], x[i + 2]), Hi64(x[i], x[i + 2]));
  const __m512 lo = _mm512_unpacklo_ps(y[0], y[1]), hi = _mm512_unpackhi_ps(y[0], y[1]);
  const __m512 r = _mm512_add_ps(Lo64(lo, hi), Hi64(lo, hi));
  return _mm512_shuffle_f32x4(r, r, 0xD8);
}

#include "kernels/cpu/kv_attention_int8.inc"

// s [rows, kKeyBlock] += ‖r_t‖ factor ⟨S q'_r, sign(S r_t)⟩ for nt coded keys: by VNNI when
// PrepareQjl quantized S q', else 16 keys at a time per row, each key's 16-channel sign words used
// as masks of one masked add into its own accumulator, the 16 accumulators reduced together (no
// horizontal sum per key).
inline void AddQjlBlock(int64_t rows, const float* sq, const float* sq_sum, int64_t m,
                        const uint8_t* bits, const uint16_t* norms, int64_t nt, float factor,
                        const QjlInt8& qj, float* s) {
  const int64_t sb = QjlSignBytes(m);
  if (qj.ok) {
    ScoreQjlInt8(qj, rows, m, bits, norms, nt, factor, s);
    return;
  }
  if (m % 16 != 0) {
    for (int64_t t = 0; t < nt; ++t) {
      const float w = F16ToF32(norms[t]) * factor;
      for (int64_t r = 0; r < rows; ++r)
        s[r * kKeyBlock + t] += w * SignDot(sq + r * m, sq_sum[r], bits + t * sb, m);
    }
    return;
  }
  for (int64_t t0 = 0; t0 < nt; t0 += 16) {
    const int64_t nk = std::min<int64_t>(16, nt - t0);
    const __mmask16 kmask = __mmask16((1u << nk) - 1);
    const __m512 w = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(kmask, norms + t0)),
                                   _mm512_set1_ps(factor));
    for (int64_t r = 0; r < rows; ++r) {
      __m512 acc[16];
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
      for (int64_t c = 0; c < m; c += 16) {
        const __m512 y = _mm512_loadu_ps(sq + r * m + c);
        for (int64_t i = 0; i < nk; ++i) {
          uint16_t mk;
          std::memcpy(&mk, bits + (t0 + i) * sb + c / 8, 2);
          acc[i] = _mm512_mask_add_ps(acc[i], __mmask16(mk), acc[i], y);
        }
      }
      // ⟨sq, sign⟩ = 2 Σ_{bits set} sq_j - Σ_j sq_j
      const __m512 dot =
          _mm512_fmsub_ps(_mm512_set1_ps(2.0f), ReduceSixteenPs(acc), _mm512_set1_ps(sq_sum[r]));
      float* row = s + r * kKeyBlock + t0;
      _mm512_mask_storeu_ps(row, kmask, _mm512_fmadd_ps(w, dot, _mm512_maskz_loadu_ps(kmask, row)));
    }
  }
}

inline bool PrepareQjl(const Tables& t, const float* sq, int64_t rows, int64_t m, QjlInt8* qj) {
  if (!t.qjl_int8) return false;
  QuantizeQjl(sq, rows, m, qj);
  return qj->ok = true;
}

inline bool PrepareQueries(const Tables& t, const float* qr, int64_t rows, int64_t d,
                           const QueryInt8& qi) {
  if (!t.kint8.ok) return false;
  QuantizeQueries(t.kint8, qr, rows, d, qi);
  return true;
}
inline bool ScoreCoded(const Tables& t, const QueryInt8& qi, int64_t rows, int64_t d,
                       int64_t code_bytes, const uint8_t* codes, const uint16_t* scales, int64_t nt,
                       float* s) {
  ScoreCodedKeys(t.kint8, qi, rows, d, code_bytes, codes, scales, nt, s);
  return true;
}

#include "kernels/cpu/kv_attention_body.inc"

}  // namespace avx512
#pragma GCC pop_options

bool HasVnni() {
  static const bool ok = __builtin_cpu_supports("avx512vnni");
  return ok;
}
bool HasAvx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return ok;
}
#else
bool HasAvx512() { return false; }
bool HasVnni() { return false; }
#endif

}  // namespace

void SetKvInt8Scoring(bool on) { g_int8_scoring.store(on); }
bool KvInt8Scoring() { return g_int8_scoring.load(); }

void CpuCompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                            const AttentionParams& p, float* out) {
  Tables tables;
  FillTables(kv.k_format, tables.k);
  FillTables(kv.v_format, tables.v);
  tables.fast = FastLayout(kv.k_format) && FastLayout(kv.v_format) && p.head_dim % 16 == 0;
  const bool simd = tables.fast && HasAvx512();
  if (simd && HasVnni() && g_int8_scoring.load(std::memory_order_relaxed) &&
      kv.k_format.dim == p.head_dim)
    tables.kint8 = FillKeyInt8(kv.k_format);
  const int64_t qjl_m = kv.qjl_matrix ? kv.qjl_m : 0;
  tables.qjl_int8 = simd && HasVnni() && g_int8_scoring.load(std::memory_order_relaxed) &&
                    qjl_m > 0 && qjl_m % 64 == 0 && qjl_m <= 256;
  const int64_t qblocks = (n + kQueryBlock - 1) / kQueryBlock;
  const int64_t group = p.num_heads / p.num_kv_heads, d = p.head_dim;
  const int64_t qm = kv.qjl_matrix ? kv.qjl_m : 0;
  const size_t scratch_floats =
      size_t(2 * kKeyBlock * d +
             kQueryBlock * group * (2 * d + 2 + kKeyBlock + 3 + d / 4 + 1 + qm + 1 + qm / 4 + 3));
  ThreadPool::Global().Run(p.num_kv_heads * qblocks, [&](int64_t task, int) {
    thread_local AlignedBuffer<float> scratch;
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    const int64_t kvh = task % p.num_kv_heads, qb = task / p.num_kv_heads;
    const int64_t i0 = qb * kQueryBlock, i1 = std::min(n, i0 + kQueryBlock);
#if defined(__x86_64__)
    if (simd) {
      avx512::AttendTask(q, i0, i1, pos0, kvh, kv, tables, p, out, scratch.data());
      return;
    }
#endif
    generic::AttendTask(q, i0, i1, pos0, kvh, kv, tables, p, out, scratch.data());
  });
}

}  // namespace tq::kernels
