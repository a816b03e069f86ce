// RecurrentStep::RunMamba2: the Mamba-2 mixer (recurrent_forward.h has the math).
#include "model/recurrent_forward.h"

namespace tq {

using Buf = ForwardWorkspace;

void RecurrentStep::RunMamba2(const LayerWeights& L, const Mamba2Spec& m, const float* h,
                              float* y) {
  const int64_t n = n_, I = m.Inner(), C = m.ConvDim(), H = m.num_heads;
  const int64_t GN = m.n_groups * m.state_size;
  float* z = Buf::Need(be_, ws_.dn_z, n * I, "the Mamba gate");              // [n, I]
  float* xbc = Buf::Need(be_, ws_.dn_qkv, n * C, "the Mamba projections");   // [n, C]
  float* dt_raw = Buf::Need(be_, ws_.dn_ba, n * H, "the Mamba step sizes");  // [n, H]
  const Linear* group[] = {L.ssm_z.get(), L.ssm_xbc.get(), L.ssm_dt.get()};
  float* outs[] = {z, xbc, dt_raw};
  MatMulShared(be_, group, h, n, outs);
  float* dt = Buf::Need(be_, ws_.dn_g, n * H, "the Mamba step sizes");  // [n, H]
  be_.SsmDt(dt_raw, H, n, H, L.ssm_dt_bias.data(), m.dt_min, m.dt_max, dt);

  float* conv = Buf::Need(be_, ws_.dn_conv, n * C, "the Mamba conv output");  // [n, C]
  float* yo = Buf::Need(be_, ws_.dn_out, n * I, "the Mamba output");          // [n, H, P]
  const kernels::Conv1dParams cp{C, m.conv_kernel, /*silu=*/true};
  kernels::SsdParams sp;
  sp.num_heads = H;
  sp.head_dim = m.head_dim;
  sp.state_size = m.state_size;
  sp.n_groups = m.n_groups;
  sp.x_stride = sp.bc_stride = C;
  const float* bias = L.ssm_conv_bias.empty() ? nullptr : L.ssm_conv_bias.data();
  for (const Seg& s : segs_) {
    float* state = s.cache->RecurrentState(L.state_index);  // [conv (K-1)·C | h H·P·N]
    float* cs = conv + s.begin * C;
    be_.CausalConv1d(xbc + s.begin * C, s.count, C, L.ssm_conv.data(), bias, state, cp, cs);
    be_.Ssd(cs, cs + I, cs + I + GN, dt + s.begin * H, L.ssm_a.data(), L.ssm_d.data(), s.count,
            state + (m.conv_kernel - 1) * C, sp, yo + s.begin * I);
  }
  be_.GatedRmsNorm(yo, n, I, I / m.n_groups, z, L.ssm_norm.data(), m.norm_eps,
                   /*gate_first=*/true, yo);
  L.ssm_out->MatMul(be_, yo, n, y);  // [n, hidden]
}

}  // namespace tq
