// Nemotron-H: one block per layer (Mamba-2, attention, ReLU² MLP or MoE) by layers_block_type,
// each behind one RMSNorm; tensors under backbone.
#include "model/architecture.h"

namespace tq {

const Architecture& NemotronHArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "nemotron_h";
    a.moe = true;
    a.attn_rope = false;  // Mamba layers carry position; attention uses none
    ArchTensorNames& n = a.names;
    n.embed = "backbone.embeddings.weight";
    n.final_norm = "backbone.norm_f.weight";
    n.attn_norm = "backbone.layers.{L}.norm.weight";
    n.ffn_norm = "backbone.layers.{L}.norm.weight";  // the same single norm
    n.q = "backbone.layers.{L}.mixer.q_proj";
    n.k = "backbone.layers.{L}.mixer.k_proj";
    n.v = "backbone.layers.{L}.mixer.v_proj";
    n.o = "backbone.layers.{L}.mixer.o_proj";
    n.up = "backbone.layers.{L}.mixer.up_proj";
    n.down = "backbone.layers.{L}.mixer.down_proj";
    n.router = "backbone.layers.{L}.mixer.gate";
    n.router_correction_bias = "backbone.layers.{L}.mixer.gate.e_score_correction_bias";
    n.expert_up = "backbone.layers.{L}.mixer.experts.{E}.up_proj";
    n.expert_down = "backbone.layers.{L}.mixer.experts.{E}.down_proj";
    n.shared_up = "backbone.layers.{L}.mixer.shared_experts.up_proj";
    n.shared_down = "backbone.layers.{L}.mixer.shared_experts.down_proj";
    n.ssm_in = "backbone.layers.{L}.mixer.in_proj";
    n.ssm_conv = "backbone.layers.{L}.mixer.conv1d";
    n.ssm_a_log = "backbone.layers.{L}.mixer.A_log";
    n.ssm_d = "backbone.layers.{L}.mixer.D";
    n.ssm_dt_bias = "backbone.layers.{L}.mixer.dt_bias";
    n.ssm_norm = "backbone.layers.{L}.mixer.norm.weight";
    n.ssm_out = "backbone.layers.{L}.mixer.out_proj";
    return a;
  }();
  return arch;
}

}  // namespace tq
