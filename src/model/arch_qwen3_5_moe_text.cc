// Qwen3.5 / 3.6 MoE (text): qwen3_5_text's mixers with qwen3_next's MoE + gated shared expert.
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen35MoeTextArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen3_5_moe_text";
    a.qk_norm = true;
    a.moe = true;
    a.norm_plus_one = true;
    a.attn_output_gate = true;
    a.shared_expert_gate = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
