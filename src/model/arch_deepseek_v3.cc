// DeepSeek-V3 / R1 / Kimi-K2 layout: deepseek_v2's MLA; sigmoid routing with a correction bias,
// group-limited top-k, renormalised × routed_scaling_factor.
#include "model/architecture.h"

namespace tq {

const Architecture& DeepseekV3Architecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "deepseek_v3";
    a.moe = true;
    a.names.shared_gate = "model.layers.{L}.mlp.shared_experts.gate_proj";
    a.names.shared_up = "model.layers.{L}.mlp.shared_experts.up_proj";
    a.names.shared_down = "model.layers.{L}.mlp.shared_experts.down_proj";
    return a;
  }();
  return arch;
}

}  // namespace tq
