// Qwen1.5-MoE / Qwen2-MoE: qwen2 attention (q/k/v biases); MoE with softmax top-k routing and
// one shared expert scaled by sigmoid(x · shared_expert_gate).
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen2MoeArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen2_moe";
    a.qkv_bias = true;
    a.o_bias_follows_config = false;
    a.sliding_window = true;
    a.moe = true;
    a.shared_expert_gate = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
