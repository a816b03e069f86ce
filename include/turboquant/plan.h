// Will it fit? The memory plan `turboquant plan` prints, from config.json and the safetensors
// headers only (no weights are read).
#pragma once

#include <cstdint>
#include <string>

#include "turboquant/export.h"

namespace turboquant {

struct PlanRequest {
  std::string path;        // model directory
  int64_t context = 4096;  // tokens in the KV cache
  double ram_gb = 0;       // usable memory; 0 = this machine's
};

struct PlanReport {
  std::string verdict;  // "fits", "fits_smaller", "does_not_fit"
  int64_t weights_bytes = 0, kv_bytes = 0, workspace_bytes = 0, reserve_bytes = 0;
  int64_t peak_bytes = 0, usable_bytes = 0;
  int64_t max_context = 0;  // when it does not fit: the largest context that does (0 = none)
};

TQ_API PlanReport Plan(const PlanRequest& request);

}  // namespace turboquant
