// Qwen2 / Qwen2.5: biases on q/k/v (none on o_proj); optional sliding window on the layers at
// and above max_window_layers when use_sliding_window is set.
#include "model/architecture.h"

namespace tq {

const Architecture& Qwen2Architecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "qwen2";
    a.qkv_bias = true;
    a.o_bias_follows_config = false;
    a.sliding_window = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
