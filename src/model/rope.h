// Rotary position embedding frequencies, computed as Hugging Face's rope init functions do
// (modeling_rope_utils.py: default, linear, llama3, yarn) so that angles match bit for bit in
// fp32: exponents 2i/d in fp32, base^e rounded to fp32, scaling formulas in fp32.
#pragma once

#include <vector>

#include "io/model_config.h"

namespace tq {

struct RopeFrequencies {
  std::vector<float> inv_freq;  // [head_dim / 2]; pair (i, i + head_dim/2) turns by pos*inv_freq[i]
  float attention_factor = 1.0f;  // multiplies cos and sin (YaRN's mscale)
};

// `dim` is the rotary dimension (head_dim). Throws for dynamic NTK scaling beyond what it
// supports and for odd dims.
RopeFrequencies ComputeRopeFrequencies(const ModelConfig& config, int64_t dim);

}  // namespace tq
