// Host-side MoE routing rules that are not a backend op (yet): DeepSeek-V3's sigmoid scores with
// a selection-only correction bias and group-limited top-k. The logits come from the device (the
// MoE path waits for its choices anyway); the result feeds the same grouping by expert.
#pragma once

#include <cstdint>
#include <vector>

namespace tq {

struct GroupTopKRule {
  int64_t num_experts = 0, top_k = 0;
  int64_t n_group = 1, topk_group = 1;     // experts split into n_group groups; keep topk_group
  bool renormalize = true;                 // chosen weights / (their sum + 1e-20)
  const float* correction_bias = nullptr;  // [num_experts], added for selection only
};

// logits [n, E] -> chosen [n, top_k] expert ids (descending selection score, ties: lower id) and
// weight [n, top_k] = sigmoid(logit) of each (renormalized when asked), as Hugging Face's
// DeepseekV3 router: score s = sigmoid(l); selection t = s + bias; a group's score is the sum of
// its two best t; the topk_group best groups stay, the other experts' t become 0; top-k of t.
void SigmoidGroupTopK(const float* logits, int64_t n, const GroupTopKRule& r,
                      std::vector<int32_t>& chosen, std::vector<float>& weight);

}  // namespace tq
