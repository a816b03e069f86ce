// Qwen3: RMSNorm over head_dim on every q and k head (q_norm/k_norm), applied before RoPE.
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen3Architecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen3";
    a.qk_norm = true;
    a.sliding_window = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
