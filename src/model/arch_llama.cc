// Llama 2/3 (and every "llama" checkpoint): the generic decoder as it is. Llama-3 RoPE scaling
// comes from config.json's rope_scaling, not from here.
#include "model/architecture.h"

namespace tq {

const Architecture& LlamaArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "llama";
    return a;
  }();
  return arch;
}

}  // namespace tq
