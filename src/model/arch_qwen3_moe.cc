// Qwen3-MoE: qwen3 attention; MoE blocks (router softmax over all experts -> top-k -> renormalise
// when norm_topk_prob) on the layers selected by decoder_sparse_step and mlp_only_layers, dense
// MLPs (intermediate_size) elsewhere.
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen3MoeArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen3_moe";
    a.qk_norm = true;
    a.sliding_window = true;
    a.moe = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
