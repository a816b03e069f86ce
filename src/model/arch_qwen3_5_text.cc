// Qwen3.5 (text, dense): qwen3_next's layers with four separate DeltaNet input projections and a
// dense SiLU MLP. Multimodal checkpoints load through text_config.
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen35TextArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen3_5_text";
    a.qk_norm = true;
    a.norm_plus_one = true;
    a.attn_output_gate = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
