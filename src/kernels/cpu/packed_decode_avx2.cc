// AVX2 int8 decode kernel for packed q2/q3/q4 weights (packed_decode.h), for CPUs without
// AVX-512 VNNI. A step is one 32-code unit expanded to a ymm of code indices in natural order;
// the codebook becomes signed int8 centroids through vpshufb, and vpmaddubsw needs an unsigned
// operand, so it takes |w| and x with w's sign (values stay <= 2·127·127, no saturation).
// Affine codes (0..15) are already unsigned. q8 (256 levels): 16 vpshufb over 16-entry slices of
// the codebook, each slice taking the codes whose high nibble selects it (4 ops per slice); about
// 3x the generic float path, below the AVX-512 vpermi2b lookup.
// Group scales (fp16 or e8 codes into a per-tensor table) are converted to fp32 once per row block
// (RowScales); with groups of 16 a unit's two groups give its low and high four dword lanes.
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
#include "kernels/cpu/packed_decode.h"

#define TQ_AVX2 __attribute__((target("avx2,fma,f16c,bmi2")))
#define TQ_AVX2_INLINE TQ_AVX2 inline __attribute__((always_inline))

namespace tq::kernels::cpu::isa {
namespace {

using quant::CodeFormat;
using quant::QuantMethod;

// One token: xq int8 [units, 32] (natural order), xs float [units] (activation scale per unit),
// gsum float [groups] (Σx per weight group, affine).
struct TokenView {
  const int8_t* xq;
  const float* xs;
  const float* gsum;
};

int64_t TokenFloats(int64_t units, int64_t groups) {
  return units * 8 + (units + 7) / 8 * 8 + (groups + 7) / 8 * 8;
}

void PrepareToken(const float* x, int64_t cols, int64_t g, float* base, TokenView* tv) {
  const int64_t units = cols / 32, groups = cols / g;
  auto* xq = reinterpret_cast<int8_t*>(base);
  float* xs = base + units * 8;
  float* gsum = xs + (units + 7) / 8 * 8;
  for (int64_t u = 0; u < units; ++u) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[u * 32 + j]));
    xs[u] = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) xq[u * 32 + j] = int8_t(std::lrintf(x[u * 32 + j] * inv));
  }
  for (int64_t j = 0; j < groups; ++j) {
    float sum = 0.0f;
    for (int64_t c = j * g; c < (j + 1) * g; ++c) sum += x[c];
    gsum[j] = sum;
  }
  *tv = {xq, xs, gsum};
}

template <CodeFormat F>
TQ_AVX2_INLINE __m256i Expand(const uint8_t* p) {
  if constexpr (F == CodeFormat::kQ8) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  } else if constexpr (F == CodeFormat::kQ4) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i z = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(z, _mm256_set1_epi8(0x0F));
  } else {
    uint64_t lo;
    std::memcpy(&lo, p, 8);
    __m256i z = _mm256_srlv_epi64(_mm256_set1_epi64x(int64_t(lo)), _mm256_set_epi64x(6, 4, 2, 0));
    z = _mm256_and_si256(z, _mm256_set1_epi8(0x03));
    if constexpr (F == CodeFormat::kQ3) {
      uint32_t h;
      std::memcpy(&h, p + 8, 4);
      // Byte j gets byte j/8 of h, then its bit j%8.
      const __m256i hb = _mm256_shuffle_epi8(
          _mm256_set1_epi32(int(h)),
          _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0));
      const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
      z = _mm256_or_si256(z, _mm256_and_si256(set, _mm256_set1_epi8(4)));
    }
    return z;
  }
}

TQ_AVX2_INLINE float H2F(uint16_t h) { return _cvtsh_ss(h); }

struct Ctx {
  const PackedMatrix* w;
  __m256i table;       // signed int8 centroids in both 128-bit lanes (<= 16 levels)
  __m256i slices[16];  // q8: centroids 16k .. 16k+15 in both lanes
  float cb_scale;
};

// Signed int8 centroids of 32 codes.
template <CodeFormat F>
TQ_AVX2_INLINE __m256i Lookup(const Ctx& c, __m256i code) {
  if constexpr (F == CodeFormat::kQ8) {
    // d = code - 16k: slice k's codes have d in [0, 16); adding 0x70 with unsigned saturation
    // sets bit 7 (vpshufb writes 0) for every other code.
    const __m256i step = _mm256_set1_epi8(16), bias = _mm256_set1_epi8(0x70);
    __m256i d = code, wv = _mm256_setzero_si256();
    for (int k = 0; k < 16; ++k) {
      wv = _mm256_or_si256(wv, _mm256_shuffle_epi8(c.slices[k], _mm256_adds_epu8(d, bias)));
      d = _mm256_sub_epi8(d, step);
    }
    return wv;
  } else {
    return _mm256_shuffle_epi8(c.table, code);
  }
}

// ws [R, groups] = the fp32 group scales of rows r0 .. r0+R-1.
template <int R>
TQ_AVX2 void RowScales(const PackedMatrix& w, int64_t r0, float* ws) {
  const int64_t n = R * (w.cols / w.group_size), i0 = r0 * (w.cols / w.group_size);
  if (w.scale_codes != nullptr) {  // e8: 8 codes → one gather from the table
    const uint8_t* q = w.scale_codes + i0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256i idx =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
      _mm256_storeu_ps(ws + i, _mm256_i32gather_ps(w.scale_table, idx, 4));
    }
    for (; i < n; ++i) ws[i] = w.scale_table[q[i]];
    return;
  }
  const uint16_t* h = w.scales + i0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(ws + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) ws[i] = _cvtsh_ss(h[i]);
}

// Prefetch of the next R-row block (see packed_decode_avx512.cc): each unit step prefetches
// its share of the block's R·row_bytes bytes.
template <CodeFormat F, int R>
TQ_AVX2_INLINE void PrefetchUnit(const uint8_t* pf, int64_t u) {
  if (pf == nullptr) return;
  constexpr int kBytes = R * quant::Traits(F).bytes_per_unit;
  const char* a = reinterpret_cast<const char*>(pf) + u * kBytes;
  for (int k = 0; k < kBytes; k += 64) _mm_prefetch(a + k, _MM_HINT_T1);
  if constexpr (kBytes % 64 != 0) _mm_prefetch(a + kBytes - 1, _MM_HINT_T1);
}

// y[t · ystride + r] = row r0 + r of Ŵ · token t (without bias), r < R, t < N: each row's codes
// are expanded and looked up once per unit for the N tokens.
// kLooked: `looked` holds the R rows already as signed int8 centroids ([R, cols], q8 with many
// tokens: its 16-slice lookup is done once per row instead of once per pass). wsf [R, groups]:
// the rows' fp32 group scales (RowScales). kG16: groups of 16 (two per unit).
template <CodeFormat F, bool kAffine, bool kG16, int R, int N, bool kLooked = false>
TQ_AVX2 void Rows(const Ctx& c, int64_t r0, const TokenView* tv, float* y, int64_t ystride,
                  const uint8_t* pf, const float* wsf, const int8_t* looked = nullptr) {
  const PackedMatrix& w = *c.w;
  const int64_t g = w.group_size, groups = w.cols / g, units = w.cols / 32;
  constexpr int kUnitBytes = kLooked ? 32 : quant::Traits(F).bytes_per_unit;
  const uint8_t* p[R];
  const float* sc[R];
  __m256 acc[R][N];
  for (int r = 0; r < R; ++r) {
    p[r] = kLooked ? reinterpret_cast<const uint8_t*>(looked) + r * w.cols
                   : w.codes + (r0 + r) * w.row_bytes;
    sc[r] = wsf + r * groups;
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  if (pf != nullptr) {
    // The next block's scales.
    const char* ps = static_cast<const char*>(w.ScaleStorage((r0 + R) * groups));
    for (int64_t k = 0; k < R * groups * w.ScaleStorageBytes(); k += 64)
      _mm_prefetch(ps + k, _MM_HINT_T0);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  constexpr CodeFormat kF = kLooked ? CodeFormat::kQ8 : F;  // looked-up rows load like q8
  for (int64_t u = 0; u < units; ++u) {
    PrefetchUnit<F, R>(pf, u);
    const int64_t gi = (u * 32) / g;
    for (int r = 0; r < R; ++r) {
      const __m256i code = Expand<kF>(p[r] + u * kUnitBytes);
      __m256i wa, wv;
      if constexpr (!kAffine) {
        wv = kLooked ? code : Lookup<F>(c, code);
        wa = _mm256_abs_epi8(wv);
      }
      __m256 wsv;  // kG16: group 2u in the low four lanes (codes 0..15), 2u + 1 in the high
      float ws = 0.0f;
      if constexpr (kG16) {
        wsv = _mm256_blend_ps(_mm256_set1_ps(sc[r][2 * u]), _mm256_set1_ps(sc[r][2 * u + 1]), 0xF0);
      } else {
        ws = sc[r][gi];
      }
      for (int t = 0; t < N; ++t) {
        const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(tv[t].xq + u * 32));
        const __m256i prod = kAffine ? _mm256_maddubs_epi16(code, xv)
                                     : _mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv, wv));
        const __m256 d = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
        if constexpr (kG16) {
          acc[r][t] =
              _mm256_fmadd_ps(d, _mm256_mul_ps(_mm256_set1_ps(tv[t].xs[u]), wsv), acc[r][t]);
        } else {
          acc[r][t] = _mm256_fmadd_ps(d, _mm256_set1_ps(tv[t].xs[u] * ws), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < N; ++t) {
      const __m256 a = acc[r][t];
      const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
      const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
      float v = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2))) * c.cb_scale;
      if constexpr (kAffine) {
        const uint16_t* mn = w.mins + (r0 + r) * groups;
        for (int64_t j = 0; j < groups; ++j) v += H2F(mn[j]) * tv[t].gsum[j];
      }
      y[t * ystride + r] = v;
    }
  }
}

// Rows r0 .. r0+R-1 for all n tokens, up to 4 tokens per pass (R·N ymm accumulators).
template <CodeFormat F, bool kAffine, bool kG16, int R>
TQ_AVX2 void RowsAllTokens(const Ctx& c, int64_t r0, const TokenView* tv, int64_t n, float* y,
                           int64_t ystride, const uint8_t* pf) {
  const PackedMatrix& w = *c.w;
  thread_local AlignedBuffer<float> wsf;  // [R, groups]
  if (wsf.size() < size_t(R * (w.cols / w.group_size)))
    wsf.resize(size_t(R * (w.cols / w.group_size)));
  RowScales<R>(w, r0, wsf.data());
  const float* ws = wsf.data();
  if constexpr (F == CodeFormat::kQ8 && !kAffine) {
    if (n > 4) {  // look the R rows up once into an L1-resident buffer, then run the passes
      thread_local AlignedBuffer<int8_t> looked;
      if (looked.size() < size_t(R * w.cols)) looked.resize(size_t(R * w.cols));
      for (int r = 0; r < R; ++r)
        for (int64_t u = 0; u < w.cols / 32; ++u)
          _mm256_store_si256(reinterpret_cast<__m256i*>(looked.data() + r * w.cols + u * 32),
                             Lookup<F>(c, Expand<F>(w.codes + (r0 + r) * w.row_bytes + u * 32)));
      for (int64_t t0 = 0; t0 < n; t0 += 4) {
        const TokenView* tp = tv + t0;
        float* yp = y + t0 * ystride + r0;
        switch (std::min<int64_t>(4, n - t0)) {
          case 1:
            Rows<F, false, kG16, R, 1, true>(c, r0, tp, yp, ystride, nullptr, ws, looked.data());
            break;
          case 2:
            Rows<F, false, kG16, R, 2, true>(c, r0, tp, yp, ystride, nullptr, ws, looked.data());
            break;
          case 3:
            Rows<F, false, kG16, R, 3, true>(c, r0, tp, yp, ystride, nullptr, ws, looked.data());
            break;
          default:
            Rows<F, false, kG16, R, 4, true>(c, r0, tp, yp, ystride, nullptr, ws, looked.data());
            break;
        }
      }
      return;
    }
  }
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const TokenView* tp = tv + t0;
    float* yp = y + t0 * ystride + r0;
    const uint8_t* f = t0 == 0 ? pf : nullptr;
    switch (std::min<int64_t>(4, n - t0)) {
      case 1:
        Rows<F, kAffine, kG16, R, 1>(c, r0, tp, yp, ystride, f, ws);
        break;
      case 2:
        Rows<F, kAffine, kG16, R, 2>(c, r0, tp, yp, ystride, f, ws);
        break;
      case 3:
        Rows<F, kAffine, kG16, R, 3>(c, r0, tp, yp, ystride, f, ws);
        break;
      default:
        Rows<F, kAffine, kG16, R, 4>(c, r0, tp, yp, ystride, f, ws);
        break;
    }
  }
}

template <CodeFormat F, bool kAffine, bool kG16>
void RunFormat(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
               const Ctx& ctx) {
  const int64_t cols = w.cols, rows = w.rows, g = w.group_size;
  const int64_t per_token = TokenFloats(cols / 32, cols / g);
  thread_local AlignedBuffer<float> buf;
  if (buf.size() < size_t(per_token * n)) buf.resize(size_t(per_token * n));
  TokenView tv[kFastDecodeMaxTokens];
  for (int64_t i = 0; i < n; ++i)
    PrepareToken(x + i * cols, cols, g, buf.data() + i * per_token, &tv[i]);
  auto body = [&](int64_t b, int64_t e) {
    int64_t r = b;
    for (; r + 4 <= e; r += 4) {
      const uint8_t* pf = r + 8 <= rows ? w.codes + (r + 4) * w.row_bytes : nullptr;
      RowsAllTokens<F, kAffine, kG16, 4>(ctx, r, tv, n, y, rows, pf);
    }
    for (; r < e; ++r) RowsAllTokens<F, kAffine, kG16, 1>(ctx, r, tv, n, y, rows, nullptr);
    if (bias != nullptr)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = b; k < e; ++k) y[i * rows + k] += bias[k];
  };
  ForRowBlocks(rows, cols, body);
}

template <CodeFormat F>
void Dispatch(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
              const Ctx& ctx) {
  const bool g16 = w.group_size == 16;
  if (w.method == QuantMethod::kAffine) {
    return g16 ? RunFormat<F, true, true>(x, n, w, bias, y, ctx)
               : RunFormat<F, true, false>(x, n, w, bias, y, ctx);
  }
  g16 ? RunFormat<F, false, true>(x, n, w, bias, y, ctx)
      : RunFormat<F, false, false>(x, n, w, bias, y, ctx);
}

}  // namespace

bool Avx2Supports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  // Affine q8 codes (0..255) times int8 would saturate vpmaddubsw's int16 pair sums.
  const bool q8_ok = f == CodeFormat::kQ8 && w.method != QuantMethod::kAffine;
  return (f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4 || q8_ok) &&
         (w.group_size == 16 || w.group_size % 32 == 0) && w.cols % 32 == 0;
}

TQ_AVX2 void Avx2Decode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                        float* y) {
  Ctx ctx{};
  ctx.w = &w;
  ctx.cb_scale = 1.0f;
  if (w.method != QuantMethod::kAffine) {
    const int levels = quant::Traits(w.format).levels;
    float amax = 0.0f;
    for (int i = 0; i < levels; ++i) amax = std::max(amax, std::fabs(w.codebook[i]));
    const float s = amax > 0.0f ? 127.0f / amax : 0.0f;
    ctx.cb_scale = amax > 0.0f ? amax / 127.0f : 0.0f;
    alignas(16) int8_t tab[256] = {};
    for (int i = 0; i < levels; ++i) tab[i] = int8_t(std::lrintf(w.codebook[i] * s));
    ctx.table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tab)));
    if (levels > 16)
      for (int k = 0; k < 16; ++k)
        ctx.slices[k] = _mm256_broadcastsi128_si256(
            _mm_load_si128(reinterpret_cast<const __m128i*>(tab + 16 * k)));
  }
  switch (w.format) {
    case CodeFormat::kQ2:
      return Dispatch<CodeFormat::kQ2>(x, n, w, bias, y, ctx);
    case CodeFormat::kQ3:
      return Dispatch<CodeFormat::kQ3>(x, n, w, bias, y, ctx);
    case CodeFormat::kQ4:
      return Dispatch<CodeFormat::kQ4>(x, n, w, bias, y, ctx);
    case CodeFormat::kQ8:
      return Dispatch<CodeFormat::kQ8>(x, n, w, bias, y, ctx);
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
