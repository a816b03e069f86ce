// The scalar oracle for attention on a compressed KV cache (kv_ops.h): every key and value of
// every span is decoded to its rotated fp32 channels, scores and the rotated output accumulate in
// double, and the output is un-rotated once per (query, head). With a QJL sketch, coded keys'
// scores add ‖r‖ √(π/2)/m ⟨S q', sign(S r)⟩ (kv_ops.h). With an outlier split (k_order /
// v_order), the query is gathered into the key's channel order before its rotation (each subset's
// own rotation), and the output is scattered back after the value un-rotation. Obvious on purpose.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "kernels/kv_ops.h"

namespace tq::kernels {
namespace {

// Rotated channels of kv head h at position t (keys if `key`, else values) -> out [dim].
void LoadRotated(const CompressedKvView& kv, int64_t h, int64_t t, bool key, float* out) {
  const int64_t d = kv.k_format.dim;
  for (int i = 0; i < kv.num_spans; ++i) {
    const KvSpan& s = kv.spans[i];
    if (t < s.begin || t >= s.end) continue;
    const int64_t slot = h * s.head_stride + (t - s.begin);
    if (s.coded) {
      const KvCodeFormat& f = key ? kv.k_format : kv.v_format;
      const uint8_t* codes = (key ? s.k_codes : s.v_codes) + slot * f.code_bytes;
      const uint16_t* scales = (key ? s.k_scales : s.v_scales) + slot * f.groups();
      DecodeKvVector(f, codes, scales, out);
    } else {
      const uint16_t* src = (key ? s.k16 : s.v16) + slot * d;
      for (int64_t j = 0; j < d; ++j) out[j] = F16ToF32(src[j]);
    }
    return;
  }
}

// The QJL term of kv head h's key at t (0 for fp16 positions or without a sketch), sq = S q'.
double QjlTerm(const CompressedKvView& kv, int64_t h, int64_t t, const float* sq) {
  if (!kv.qjl_matrix) return 0.0;
  for (int i = 0; i < kv.num_spans; ++i) {
    const KvSpan& s = kv.spans[i];
    if (t < s.begin || t >= s.end || !s.coded) continue;
    const int64_t slot = h * s.head_stride + (t - s.begin);
    return double(F16ToF32(s.k_qjl_norm[slot])) * QjlFactor(kv.qjl_m) *
           QjlSignDot(sq, s.k_qjl + slot * QjlSignBytes(kv.qjl_m), kv.qjl_m);
  }
  return 0.0;
}

}  // namespace

void RefCompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                            const AttentionParams& p, float* out) {
  const int64_t group = p.num_heads / p.num_kv_heads, d = p.head_dim;
  std::vector<double> score(static_cast<size_t>(pos0 + n)), acc(static_cast<size_t>(d));
  std::vector<float> qr(static_cast<size_t>(d)), x(static_cast<size_t>(d));
  std::vector<float> sq(static_cast<size_t>(kv.qjl_m));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = pos0 + i;
    const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
    for (int64_t h = 0; h < p.num_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qh = q + (i * p.num_heads + h) * d;
      if (kv.k_order) {  // y = P q: the key's channel order (outliers first)
        for (int64_t j = 0; j < d; ++j) qr[size_t(j)] = qh[kv.k_order[kvh * d + j]];
      } else {
        std::copy_n(qh, d, qr.begin());
      }
      kv.k_rotation->Forward(qr.data());  // q' = R_k P q
      if (kv.qjl_matrix) QjlProject(kv.qjl_matrix, kv.qjl_m, d, qr.data(), sq.data());  // S q'
      double mx = -INFINITY;
      for (int64_t t = first; t <= pos; ++t) {
        LoadRotated(kv, kvh, t, true, x.data());
        double s = 0;
        for (int64_t j = 0; j < d; ++j) s += double(qr[size_t(j)]) * x[size_t(j)];
        s += QjlTerm(kv, kvh, t, sq.data());
        score[size_t(t)] = s * p.scale;
        mx = std::max(mx, score[size_t(t)]);
      }
      double sum = 0;
      for (int64_t t = first; t <= pos; ++t)
        sum += (score[size_t(t)] = std::exp(score[size_t(t)] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t t = first; t <= pos; ++t) {
        LoadRotated(kv, kvh, t, false, x.data());
        for (int64_t j = 0; j < d; ++j) acc[size_t(j)] += score[size_t(t)] * x[size_t(j)];
      }
      float* oh = out + (i * p.num_heads + h) * d;
      const float* mu = kv.v_offset ? kv.v_offset + kvh * d : nullptr;
      float* y = kv.v_order ? x.data() : oh;  // x is free again: the permuted output
      for (int64_t j = 0; j < d; ++j) y[j] = float(acc[size_t(j)] / sum + (mu ? mu[j] : 0.0));
      kv.v_rotation->Inverse(y);  // R_vᵀ Σ p_t v'_t
      if (kv.v_order)             // out = Pᵀ y: scattered back to the model's channels
        for (int64_t j = 0; j < d; ++j) oh[kv.v_order[kvh * d + j]] = y[size_t(j)];
    }
  }
}

}  // namespace tq::kernels
