// Fast CPU paths of the attention variants: one task per (row, head), online softmax in fp32
// (running max and denominator, the sink joining as one more logit), contiguous dot products and
// value accumulations the compiler vectorises. MLA runs weight-absorbed on the latent cache.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention_variant_ops.h"

namespace tq::kernels::cpu {

// The hot loops are compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time
// (GCC function multi-versioning); other targets build them once.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TQ_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TQ_HOT
#endif

namespace {

// Eight partial sums so the compiler can vectorise the reduction without -ffast-math.
inline float Dot(const float* __restrict a, const float* __restrict b, int64_t m) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < m; ++i) s += a[i] * b[i];
  return s;
}
inline void Axpy(float a, const float* __restrict src, float* __restrict dst, int64_t m) {
  for (int64_t i = 0; i < m; ++i) dst[i] += a * src[i];
}
inline float Tanh(float x) {  // see activation_cpu.cc
  x = std::clamp(x, -10.0f, 10.0f);
  return 1.0f - 2.0f / (std::exp(2.0f * x) + 1.0f);
}

// Online softmax accumulator over a stream of (logit, value row) pairs.
struct OnlineSoftmax {
  float mx = -INFINITY, den = 0;
  float* acc;  // [dv]
  int64_t dv;
  void Add(float s, const float* vrow) {
    if (s > mx) {
      const float c = std::exp(mx - s);  // 0 on the first element (mx = -inf)
      den *= c;
      for (int64_t j = 0; j < dv; ++j) acc[j] *= c;
      mx = s;
    }
    const float e = std::exp(s - mx);
    den += e;
    Axpy(e, vrow, acc, dv);
  }
  void AddDenominatorOnly(float s) {  // a sink: joins the softmax, contributes no value
    if (s > mx) {
      const float c = std::exp(mx - s);
      den *= c;
      for (int64_t j = 0; j < dv; ++j) acc[j] *= c;
      mx = s;
    }
    den += std::exp(s - mx);
  }
};

}  // namespace

void AttentionSinkSoftcap(const float* q, int64_t n, int64_t pos0, const float* k, const float* v,
                          const SinkAttentionParams& p, float* out) {
  const int64_t H = p.num_heads, Hkv = p.num_kv_heads, d = p.head_dim, dv = p.v_head_dim;
  TQ_CHECK(H > 0 && Hkv > 0 && H % Hkv == 0 && d > 0 && dv > 0, "sink attention",
           "bad heads H={} Hkv={} d={} dv={}", H, Hkv, d, dv);
  const float inv_cap = p.softcap > 0 ? 1.0f / p.softcap : 0.0f;
  ThreadPool::Global().ParallelFor(n * H, 1, [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t r = task / H, h = task % H, hk = h / (H / Hkv);
      const int64_t pos = pos0 + r;
      const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
      const float* qh = q + (r * H + h) * d;
      float* oh = out + (r * H + h) * dv;
      std::fill(oh, oh + dv, 0.0f);
      OnlineSoftmax sm{-INFINITY, 0, oh, dv};
      if (p.sinks) sm.AddDenominatorOnly(p.sinks[h]);
      const float* kh = k + hk * p.k_head_stride;
      const float* vh = v + hk * p.v_head_stride;
      for (int64_t t = first; t <= pos; ++t) {
        float s = Dot(qh, kh + t * d, d) * p.scale;
        if (p.softcap > 0) s = p.softcap * Tanh(s * inv_cap);
        sm.Add(s, vh + t * dv);
      }
      const float inv = 1.0f / sm.den;
      for (int64_t j = 0; j < dv; ++j) oh[j] *= inv;
    }
  });
}

// MLA decode, flash-decoding style: the cached positions of a row are split into chunks across
// the pool; each task streams its latent rows once and updates every head's online softmax
// (a latent row stays in L1 across the heads), then the chunks' (max, denominator, Σ p·c) merge
// per head and W_UV maps the merged latent to the output.
TQ_HOT void MlaChunk(const float* q_lat, const float* q, int64_t r, int64_t t0, int64_t t1,
                     const float* latent, const MlaParams& p, float* part) {
  const int64_t H = p.num_heads, dn = p.nope_dim, dr = p.rope_dim, R = p.kv_lora;
  const int64_t lw = R + dr, pw = R + 2;  // partial per head: [acc (R) | max | den]
  for (int64_t h = 0; h < H; ++h) {
    float* ph = part + h * pw;
    std::fill(ph, ph + R, 0.0f);
    ph[R] = -INFINITY;
    ph[R + 1] = 0;
  }
  for (int64_t t = t0; t < t1; ++t) {
    const float* c = latent + t * lw;
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (r * H + h) * (dn + dr);
      float* ph = part + h * pw;
      const float s = (Dot(q_lat + h * R, c, R) + Dot(qh + dn, c + R, dr)) * p.scale;
      OnlineSoftmax sm{ph[R], ph[R + 1], ph, R};
      sm.Add(s, c);
      ph[R] = sm.mx;
      ph[R + 1] = sm.den;
    }
  }
}

void MlaAttention(const float* q, int64_t n, int64_t pos0, const float* latent, const float* w_kv_b,
                  const MlaParams& p, float* out) {
  const int64_t H = p.num_heads, dn = p.nope_dim, dr = p.rope_dim, dv = p.v_dim, R = p.kv_lora;
  TQ_CHECK(H > 0 && dn > 0 && dr >= 0 && dv > 0 && R > 0, "mla", "bad shape");
  ThreadPool& pool = ThreadPool::Global();
  thread_local std::vector<float> q_lat, part, o_lat;
  if (int64_t(q_lat.size()) < H * R) q_lat.resize(size_t(H * R));
  if (int64_t(o_lat.size()) < R) o_lat.resize(size_t(R));
  const int64_t pw = R + 2;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t T = pos0 + r + 1;
    // q_lat_h = W_UK_hᵀ q_nope_h  [R]
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (r * H + h) * (dn + dr);
      const float* wk = w_kv_b + h * (dn + dv) * R;
      float* ql = q_lat.data() + h * R;
      std::fill(ql, ql + R, 0.0f);
      for (int64_t i = 0; i < dn; ++i) Axpy(qh[i], wk + i * R, ql, R);
    }
    const int64_t chunk = std::max<int64_t>(64, (T + 2 * pool.size() - 1) / (2 * pool.size()));
    const int64_t chunks = (T + chunk - 1) / chunk;
    if (int64_t(part.size()) < chunks * H * pw) part.resize(size_t(chunks * H * pw));
    float* parts = part.data();
    const float* ql = q_lat.data();
    pool.ParallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        MlaChunk(ql, q, r, c * chunk, std::min(T, (c + 1) * chunk), latent, p, parts + c * H * pw);
    });
    for (int64_t h = 0; h < H; ++h) {
      float mx = -INFINITY;
      for (int64_t c = 0; c < chunks; ++c) mx = std::max(mx, parts[(c * H + h) * pw + R]);
      float den = 0;
      std::fill(o_lat.begin(), o_lat.begin() + R, 0.0f);
      for (int64_t c = 0; c < chunks; ++c) {
        const float* ph = parts + (c * H + h) * pw;
        const float w = std::exp(ph[R] - mx);
        den += w * ph[R + 1];
        Axpy(w, ph, o_lat.data(), R);
      }
      const float* wv = w_kv_b + h * (dn + dv) * R + dn * R;  // W_UV [dv, R]
      float* oh = out + (r * H + h) * dv;
      const float inv = 1.0f / den;
      for (int64_t i = 0; i < dv; ++i) oh[i] = Dot(wv + i * R, o_lat.data(), R) * inv;
    }
  }
}

}  // namespace tq::kernels::cpu
