// DeepSeek-V2 (and -Lite): multi-head latent attention (low-rank q, compressed kv + shared rope
// key, interleaved rotary pairs); dense first_k_dense_replace layers, then MoE with ungated
// shared experts, softmax routing (greedy or group-limited) × routed_scaling_factor.
#include "model/architecture.h"

namespace tq {

const Architecture& DeepseekV2Architecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "deepseek_v2";
    a.moe = true;
    a.names.shared_gate = "model.layers.{L}.mlp.shared_experts.gate_proj";
    a.names.shared_up = "model.layers.{L}.mlp.shared_experts.up_proj";
    a.names.shared_down = "model.layers.{L}.mlp.shared_experts.down_proj";
    return a;
  }();
  return arch;
}

}  // namespace tq
