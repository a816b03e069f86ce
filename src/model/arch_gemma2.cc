// Gemma 2: sandwich norms (x·(1+w)), embeddings × sqrt(hidden), GELU-tanh MLP, tanh soft-caps
// of attention logits and final logits, query_pre_attn_scalar, alternating sliding window.
#include "model/architecture.h"

namespace tq {

const Architecture& Gemma2Architecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "gemma2";
    a.sliding_window = true;
    a.norm_plus_one = true;
    a.embed_scale_sqrt_hidden = true;
    a.sandwich_norm = true;
    a.names.ffn_norm = "model.layers.{L}.pre_feedforward_layernorm.weight";
    return a;
  }();
  return arch;
}

}  // namespace tq
