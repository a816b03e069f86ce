// Scalar references of the attention variants: scores in double, a plain softmax (with the sink
// logit as one more denominator term), MLA by decompressing every latent.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/attention_variant_ops.h"

namespace tq::kernels::ref {

void AttentionSinkSoftcap(const float* q, int64_t n, int64_t pos0, const float* k, const float* v,
                          const SinkAttentionParams& p, float* out) {
  const int64_t H = p.num_heads, Hkv = p.num_kv_heads, d = p.head_dim, dv = p.v_head_dim;
  TQ_CHECK(H > 0 && Hkv > 0 && H % Hkv == 0 && d > 0 && dv > 0, "sink attention ref",
           "bad heads H={} Hkv={} d={} dv={}", H, Hkv, d, dv);
  std::vector<double> s;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t pos = pos0 + r;
    const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / Hkv);
      const float* qh = q + (r * H + h) * d;
      s.assign(size_t(pos - first + 1), 0.0);
      double mx = p.sinks ? double(p.sinks[h]) : -INFINITY;
      for (int64_t t = first; t <= pos; ++t) {
        const float* kt = k + hk * p.k_head_stride + t * d;
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(qh[i]) * kt[i];
        dot *= p.scale;
        if (p.softcap > 0) dot = p.softcap * std::tanh(dot / p.softcap);
        s[size_t(t - first)] = dot;
        mx = std::max(mx, dot);
      }
      double den = p.sinks ? std::exp(double(p.sinks[h]) - mx) : 0.0;
      for (double& x : s) den += (x = std::exp(x - mx));
      float* oh = out + (r * H + h) * dv;
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t t = first; t <= pos; ++t)
          acc += s[size_t(t - first)] * v[hk * p.v_head_stride + t * dv + j];
        oh[j] = float(acc / den);
      }
    }
  }
}

void MlaAttention(const float* q, int64_t n, int64_t pos0, const float* latent, const float* w_kv_b,
                  const MlaParams& p, float* out) {
  const int64_t H = p.num_heads, dn = p.nope_dim, dr = p.rope_dim, dv = p.v_dim, R = p.kv_lora;
  TQ_CHECK(H > 0 && dn > 0 && dr >= 0 && dv > 0 && R > 0, "mla ref", "bad shape");
  const int64_t T = pos0 + n, lw = R + dr;
  // Decompress: k_nope [T, H, dn], v [T, H, dv].
  std::vector<double> kn(size_t(T * H * dn)), vv(size_t(T * H * dv));
  for (int64_t t = 0; t < T; ++t) {
    const float* c = latent + t * lw;
    for (int64_t h = 0; h < H; ++h) {
      const float* wk = w_kv_b + h * (dn + dv) * R;
      const float* wv = wk + dn * R;
      for (int64_t i = 0; i < dn; ++i) {
        double a = 0;
        for (int64_t j = 0; j < R; ++j) a += double(wk[i * R + j]) * c[j];
        kn[size_t((t * H + h) * dn + i)] = a;
      }
      for (int64_t i = 0; i < dv; ++i) {
        double a = 0;
        for (int64_t j = 0; j < R; ++j) a += double(wv[i * R + j]) * c[j];
        vv[size_t((t * H + h) * dv + i)] = a;
      }
    }
  }
  std::vector<double> s;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t pos = pos0 + r;
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (r * H + h) * (dn + dr);
      s.assign(size_t(pos + 1), 0.0);
      double mx = -INFINITY;
      for (int64_t t = 0; t <= pos; ++t) {
        double dot = 0;
        for (int64_t i = 0; i < dn; ++i) dot += qh[i] * kn[size_t((t * H + h) * dn + i)];
        const float* kpe = latent + t * lw + R;
        for (int64_t i = 0; i < dr; ++i) dot += double(qh[dn + i]) * kpe[i];
        s[size_t(t)] = dot * p.scale;
        mx = std::max(mx, s[size_t(t)]);
      }
      double den = 0;
      for (double& x : s) den += (x = std::exp(x - mx));
      for (int64_t i = 0; i < dv; ++i) {
        double acc = 0;
        for (int64_t t = 0; t <= pos; ++t) acc += s[size_t(t)] * vv[size_t((t * H + h) * dv + i)];
        out[(r * H + h) * dv + i] = float(acc / den);
      }
    }
  }
}

}  // namespace tq::kernels::ref
