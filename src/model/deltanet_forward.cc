// RecurrentStep: the gather lists of the fused layout and the Gated DeltaNet mixer.
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "model/recurrent_forward.h"

namespace tq {

using Buf = ForwardWorkspace;

RecurrentStep::RecurrentStep(kernels::Backend& be, const ModelSpec& spec, int64_t n,
                             ForwardWorkspace& ws)
    : be_(be), ws_(ws), n_(n) {
  const LayerSpec* first = nullptr;
  for (const LayerSpec& S : spec.layers)
    if (S.mixer == MixerKind::kGatedDeltaNet && !first) first = &S;
  if (!first || !first->delta.fused_in_proj) return;
  // in_proj_qkvz rows per token: Hk groups of [q dk | k dk | v r·dv | z r·dv] (r = Hv / Hk);
  // in_proj_ba: Hk groups of [b r | a r]. Gathered (in chunks of gcd(dk, dv) floats) into
  // [q all | k all | v all] [n, conv_dim], z [n, V] and [b all | a all] [n, 2 Hv].
  const DeltaNetSpec& d = first->delta;
  const int64_t Hk = d.num_k_heads, r = d.num_v_heads / Hk, dk = d.k_dim, dv = d.v_dim;
  const int64_t c = std::gcd(dk, dv), group = 2 * dk + 2 * r * dv, row = Hk * group;
  chunk_ = c;
  std::vector<int32_t>& I = ws.dn_idx_host;
  I.clear();
  auto span = [&](int64_t t, int64_t g, int64_t off, int64_t len) {
    for (int64_t i = 0; i < len / c; ++i) I.push_back(int32_t((t * row + g * group + off) / c + i));
  };
  i_qkv_ = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t g = 0; g < Hk; ++g) span(t, g, 0, dk);
    for (int64_t g = 0; g < Hk; ++g) span(t, g, dk, dk);
    for (int64_t g = 0; g < Hk; ++g) span(t, g, 2 * dk, r * dv);
  }
  i_z_ = int64_t(I.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t g = 0; g < Hk; ++g) span(t, g, 2 * dk + r * dv, r * dv);
  i_ba_ = int64_t(I.size());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t j = 0; j < r; ++j) I.push_back(int32_t(t * 2 * r * Hk + g * 2 * r + j));
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t j = 0; j < r; ++j) I.push_back(int32_t(t * 2 * r * Hk + g * 2 * r + r + j));
  }
  idx_ = Buf::Stage(be, ws.dn_idx, I.data(), int64_t(I.size()), "the DeltaNet gather lists");
}

void RecurrentStep::AddSegment(KvCache* cache, int64_t begin, int64_t count) {
  segs_.push_back({cache, begin, count});
}

void RecurrentStep::RunDeltaNet(const LayerWeights& L, const DeltaNetSpec& d, const float* h,
                                float eps, float* y) {
  const int64_t n = n_, K = d.KeyDim(), V = d.ValueDim(), C = d.ConvDim(), Hv = d.num_v_heads;
  float* qkv = Buf::Need(be_, ws_.dn_qkv, n * C, "the DeltaNet projections");  // [n, C]
  float* z = Buf::Need(be_, ws_.dn_z, n * V, "the DeltaNet gate");             // [n, V]
  float* ba = Buf::Need(be_, ws_.dn_bab, n * 2 * Hv, "the DeltaNet gates");    // [n, 2 Hv]
  const float *b = ba, *a = ba + Hv;
  int64_t gate_stride = 2 * Hv;
  if (L.dn_qkvz) {
    float* in = Buf::Need(be_, ws_.dn_in, n * (2 * K + 2 * V), "the DeltaNet projections");
    float* raw_ba = Buf::Need(be_, ws_.dn_ba, n * 2 * Hv, "the DeltaNet gates");
    const Linear* group[] = {L.dn_qkvz.get(), L.dn_ba.get()};
    float* outs[] = {in, raw_ba};
    MatMulShared(be_, group, h, n, outs);
    be_.GatherRows(in, idx_ + i_qkv_, n * C / chunk_, chunk_, qkv);
    be_.GatherRows(in, idx_ + i_z_, n * V / chunk_, chunk_, z);
    be_.GatherRows(raw_ba, idx_ + i_ba_, n * 2 * Hv, 1, ba);
  } else {
    float* a_out = ba + n * Hv;  // [n, Hv] each: b then a
    const Linear* group[] = {L.dn_qkv.get(), L.dn_z.get(), L.dn_b.get(), L.dn_a.get()};
    float* outs[] = {qkv, z, ba, a_out};
    MatMulShared(be_, group, h, n, outs);
    a = a_out;
    gate_stride = Hv;
  }
  float* g = Buf::Need(be_, ws_.dn_g, n * Hv, "the DeltaNet decay");       // [n, Hv]
  float* beta = Buf::Need(be_, ws_.dn_beta, n * Hv, "the DeltaNet beta");  // [n, Hv]
  be_.DeltaNetGates(b, a, gate_stride, n, Hv, L.dn_a_log.data(), L.dn_dt_bias.data(), g, beta);

  float* conv = Buf::Need(be_, ws_.dn_conv, n * C, "the DeltaNet conv output");  // [n, C]
  float* o = Buf::Need(be_, ws_.dn_out, n * V, "the DeltaNet output");           // [n, Hv, dv]
  const kernels::Conv1dParams cp{C, d.conv_kernel, /*silu=*/true};
  kernels::DeltaNetParams dp;
  dp.num_k_heads = d.num_k_heads;
  dp.num_v_heads = Hv;
  dp.k_dim = d.k_dim;
  dp.v_dim = d.v_dim;
  dp.q_stride = dp.k_stride = dp.v_stride = C;
  dp.scale = float(1.0 / std::sqrt(double(d.k_dim)));
  for (const Seg& s : segs_) {
    float* state = s.cache->RecurrentState(L.state_index);  // [conv (K-1)·C | S Hv·dk·dv]
    float* cs = conv + s.begin * C;
    be_.CausalConv1d(qkv + s.begin * C, s.count, C, L.dn_conv.data(), nullptr, state, cp, cs);
    be_.GatedDeltaNet(cs, cs + K, cs + 2 * K, g + s.begin * Hv, beta + s.begin * Hv, s.count,
                      state + (d.conv_kernel - 1) * C, dp, o + s.begin * V);
  }
  be_.GatedRmsNorm(o, n * Hv, d.v_dim, d.v_dim, z, L.dn_norm.data(), eps, /*gate_first=*/false, o);
  L.dn_out->MatMul(be_, o, n, y);  // [n, hidden]
}

}  // namespace tq
