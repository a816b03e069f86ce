// Fast CPU paths of the attention variants: one task per (row, head), online softmax in fp32
// (running max and denominator, the sink joining as one more logit), contiguous dot products and
// value accumulations the compiler vectorises.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention_variant_ops.h"

namespace tq::kernels::cpu {
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

}  // namespace tq::kernels::cpu
