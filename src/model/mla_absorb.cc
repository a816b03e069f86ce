// AbsorbKvB (mla_absorb.h).
#include "model/mla_absorb.h"

#include <algorithm>

#include "core/error.h"
#include "core/tensor.h"
#include "model/linear.h"
#include "model/packed_linear.h"
#include "quant/hadamard.h"

namespace tq {

MlaAbsorbed AbsorbKvB(const Linear& kv_b, const MlaSpec& m, int64_t heads) {
  const int64_t R = m.kv_lora_rank, dn = m.nope_dim, dv = m.v_dim, H = heads;
  TQ_CHECK(kv_b.out_features() == H * (dn + dv) && kv_b.in_features() == R, "mla",
           "kv_b_proj is [{}, {}], expected [{}, {}]", kv_b.out_features(), kv_b.in_features(),
           H * (dn + dv), R);
  std::vector<float> w(size_t(H * (dn + dv) * R));  // kv_b as fp32 [H·(nope + v), kv_lora]
  if (const DenseLinear* d = kv_b.AsDense()) {
    ToF32(d->weight(), w.data());
  } else if (const PackedLinear* p = kv_b.AsPacked()) {
    p->DequantizeRows(0, H * (dn + dv), w.data());
    if (p->rotation()) p->rotation()->InverseRows(w.data(), H * (dn + dv));  // W = Ŵ' R
  } else {
    Fail("mla", "kv_b_proj is neither dense nor packed");
  }
  MlaAbsorbed a;
  a.uk_t.resize(size_t(H * R * dn));
  a.uv.resize(size_t(H * dv * R));
  for (int64_t h = 0; h < H; ++h) {
    const float* wk = w.data() + h * (dn + dv) * R;  // [nope, kv_lora]
    const float* wv = wk + dn * R;                   // [v, kv_lora]
    float* uk_t = a.uk_t.data() + h * R * dn;
    for (int64_t i = 0; i < dn; ++i)
      for (int64_t j = 0; j < R; ++j) uk_t[j * dn + i] = wk[i * R + j];
    std::copy(wv, wv + dv * R, a.uv.data() + h * dv * R);
  }
  return a;
}

}  // namespace tq
