// Mixtral: mistral attention; every layer is MoE ("block_sparse_moe", experts w1 = gate,
// w3 = up, w2 = down), softmax over the top-k router logits (= softmax, top-k, renormalise).
#include "model/architecture.h"

namespace tq {

const Architecture& MixtralArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "mixtral";
    a.sliding_window = true;
    a.moe = true;
    a.moe_always_renormalize = true;
    a.expert_ffn_is_intermediate_size = true;
    a.names.router = "model.layers.{L}.block_sparse_moe.gate";
    a.names.expert_gate = "model.layers.{L}.block_sparse_moe.experts.{E}.w1";
    a.names.expert_up = "model.layers.{L}.block_sparse_moe.experts.{E}.w3";
    a.names.expert_down = "model.layers.{L}.block_sparse_moe.experts.{E}.w2";
    return a;
  }();
  return arch;
}

}  // namespace tq
