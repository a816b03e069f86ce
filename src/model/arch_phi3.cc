// Phi-3 / Phi-3.5 / Phi-4-mini: llama with one fused qkv_proj ([q; k; v] rows) and one fused
// gate_up_proj ([gate; up] rows); sliding window on every layer when configured.
#include "model/architecture.h"

namespace tq {

const Architecture& Phi3Architecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "phi3";
    a.sliding_window = true;
    a.fused_qkv = true;
    a.fused_gate_up = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
