// AVX2 int8 decode kernel for packed q2/q3/q4 weights (packed_decode.h), for CPUs without
// AVX-512 VNNI. A step is one 32-code unit expanded to a ymm of code indices in natural order;
// the codebook becomes signed int8 centroids through vpshufb, and vpmaddubsw needs an unsigned
// operand, so it takes |w| and x with w's sign (values stay <= 2·127·127, no saturation).
// Affine codes (0..15) are already unsigned. q8 (256 levels) has no byte-shuffle lookup here and
// takes the generic path.
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
  if constexpr (F == CodeFormat::kQ4) {
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
  __m256i table;  // signed int8 centroids in both 128-bit lanes
  float cb_scale;
};

template <CodeFormat F, bool kAffine, int R>
TQ_AVX2 void Rows(const Ctx& c, int64_t r0, const TokenView& tv, float* y) {
  const PackedMatrix& w = *c.w;
  const int64_t g = w.group_size, groups = w.cols / g, units = w.cols / 32;
  constexpr int kUnitBytes = quant::Traits(F).bytes_per_unit;
  const uint8_t* p[R];
  const uint16_t* sc[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    p[r] = w.codes + (r0 + r) * w.row_bytes;
    sc[r] = w.scales + (r0 + r) * groups;
    acc[r] = _mm256_setzero_ps();
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t u = 0; u < units; ++u) {
    const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(tv.xq + u * 32));
    const float xs = tv.xs[u];
    const int64_t gi = (u * 32) / g;
    for (int r = 0; r < R; ++r) {
      const __m256i code = Expand<F>(p[r] + u * kUnitBytes);
      __m256i prod;
      if constexpr (kAffine) {
        prod = _mm256_maddubs_epi16(code, xv);
      } else {
        const __m256i wv = _mm256_shuffle_epi8(c.table, code);
        prod = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv));
      }
      const __m256 d = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
      acc[r] = _mm256_fmadd_ps(d, _mm256_set1_ps(xs * H2F(sc[r][gi])), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float v = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2))) * c.cb_scale;
    if constexpr (kAffine) {
      const uint16_t* mn = w.mins + (r0 + r) * groups;
      for (int64_t j = 0; j < groups; ++j) v += H2F(mn[j]) * tv.gsum[j];
    }
    y[r] = v;
  }
}

template <CodeFormat F, bool kAffine>
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
    float out[4];
    int64_t r = b;
    for (; r + 4 <= e; r += 4)
      for (int64_t i = 0; i < n; ++i) {
        Rows<F, kAffine, 4>(ctx, r, tv[i], out);
        for (int k = 0; k < 4; ++k) y[i * rows + r + k] = out[k] + (bias ? bias[r + k] : 0.0f);
      }
    for (; r < e; ++r)
      for (int64_t i = 0; i < n; ++i) {
        Rows<F, kAffine, 1>(ctx, r, tv[i], out);
        y[i * rows + r] = out[0] + (bias ? bias[r] : 0.0f);
      }
  };
  if (rows * cols < 65536 || rows < 8) {
    body(0, rows);
  } else {
    ThreadPool& pool = ThreadPool::Global();
    const int64_t per = std::max<int64_t>(4, (rows / (8 * pool.size()) + 3) / 4 * 4);
    const int64_t tasks = (rows + per - 1) / per;
    pool.Run(tasks, [&](int64_t task, int) { body(task * per, std::min(rows, (task + 1) * per)); });
  }
}

template <CodeFormat F>
void Dispatch(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y,
              const Ctx& ctx) {
  if (w.method == QuantMethod::kAffine) return RunFormat<F, true>(x, n, w, bias, y, ctx);
  RunFormat<F, false>(x, n, w, bias, y, ctx);
}

}  // namespace

bool Avx2Supports(const PackedMatrix& w) {
  const CodeFormat f = w.format;
  return (f == CodeFormat::kQ2 || f == CodeFormat::kQ3 || f == CodeFormat::kQ4) &&
         w.group_size % 32 == 0 && w.cols % 32 == 0;
}

TQ_AVX2 void Avx2Decode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                        float* y) {
  Ctx ctx{&w, _mm256_setzero_si256(), 1.0f};
  if (w.method != QuantMethod::kAffine) {
    const int levels = quant::Traits(w.format).levels;
    float amax = 0.0f;
    for (int i = 0; i < levels; ++i) amax = std::max(amax, std::fabs(w.codebook[i]));
    const float s = amax > 0.0f ? 127.0f / amax : 0.0f;
    ctx.cb_scale = amax > 0.0f ? amax / 127.0f : 0.0f;
    alignas(16) int8_t tab[16] = {};
    for (int i = 0; i < levels; ++i) tab[i] = int8_t(std::lrintf(w.codebook[i] * s));
    ctx.table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tab)));
  }
  switch (w.format) {
    case CodeFormat::kQ2:
      return Dispatch<CodeFormat::kQ2>(x, n, w, bias, y, ctx);
    case CodeFormat::kQ3:
      return Dispatch<CodeFormat::kQ3>(x, n, w, bias, y, ctx);
    case CodeFormat::kQ4:
      return Dispatch<CodeFormat::kQ4>(x, n, w, bias, y, ctx);
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
