// Mistral: llama plus sliding-window attention (config.sliding_window, null = none).
#include "model/architecture.h"

namespace tq {

const Architecture& MistralArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "mistral";
    a.sliding_window = true;
    return a;
  }();
  return arch;
}

}  // namespace tq
