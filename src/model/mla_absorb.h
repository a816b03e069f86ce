// Multi-head latent attention's absorbed projections (DeepSeek; forward.cc's latent path): the
// per-head blocks of kv_b_proj [H·(nope + v), kv_lora] rearranged so that decode attends on the
// latent cache [c_kv | k_pe] (kv_lora + rope floats a token) instead of per-head keys and values:
//   q_lat[h] = W_UK[h]ᵀ · q_nope[h]   (W_UK[h] = kv_b rows h·(nope+v) .. +nope:    [nope, kv_lora])
//   o[h]     = W_UV[h] · o_lat[h]      (W_UV[h] = kv_b rows h·(nope+v)+nope .. +v: [v, kv_lora])
// both as HeadMatMul weights [H, out, in] (kernels/head_matmul_ops.h). Internal to model/.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layer_spec.h"

namespace tq {

class Linear;

struct MlaAbsorbed {
  std::vector<float> uk_t;  // [H, kv_lora, nope]: W_UK[h]ᵀ
  std::vector<float> uv;    // [H, v, kv_lora]:    W_UV[h]
};

// From kv_b's weights as its forward computes with them: a dense linear's stored values as fp32,
// a packed one's codes dequantized and un-rotated (W = Ŵ' R, what convert's dequantized twin
// stores), so a converted model's forward still equals its twin's. Throws tq::Error("[mla] ...")
// when kv_b's shape is not [heads·(nope + v), kv_lora].
MlaAbsorbed AbsorbKvB(const Linear& kv_b, const MlaSpec& m, int64_t heads);

}  // namespace tq
