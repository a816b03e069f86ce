// Qwen3-Next: Gated DeltaNet layers (fused in_proj_qkvz / in_proj_ba) and gated full attention
// (q_proj emits [q | gate]) with partial RoPE; RMSNorms scale by (1 + w); MoE + gated shared
// expert.
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen3NextArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen3_next";
    a.qk_norm = true;
    a.moe = true;
    a.norm_plus_one = true;
    a.attn_output_gate = true;
    a.shared_expert_gate = true;
    a.dn_fused_in_proj = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
