// Gemma 4 (text): gemma3's layer with per-layer head_dim (global layers wider), proportional
// partial RoPE on global layers, per-layer input embeddings, a per-layer output scalar,
// unscaled q·k with q/k/v norms.
#include "model/architecture.h"

namespace tq {

const Architecture& Gemma4TextArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "gemma4_text";
    a.sliding_window = true;
    a.qk_norm = true;
    a.embed_scale_sqrt_hidden = true;
    a.sandwich_norm = true;
    a.attn_scale_one = true;
    a.v_norm = true;
    a.per_layer_inputs = true;
    a.names.ffn_norm = "model.layers.{L}.pre_feedforward_layernorm.weight";
    return a;
  }();
  return arch;
}

}  // namespace tq
