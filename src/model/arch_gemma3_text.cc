// Gemma 3 (text): gemma2's layer plus q/k norms, a local RoPE base on sliding layers, no
// soft-caps. Multimodal checkpoints (Gemma3ForConditionalGeneration) load through text_config.
#include "model/architecture.h"

namespace tq {

const Architecture& Gemma3TextArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "gemma3_text";
    a.sliding_window = true;
    a.qk_norm = true;
    a.norm_plus_one = true;
    a.embed_scale_sqrt_hidden = true;
    a.sandwich_norm = true;
    a.names.ffn_norm = "model.layers.{L}.pre_feedforward_layernorm.weight";
    return a;
  }();
  return arch;
}

}  // namespace tq
