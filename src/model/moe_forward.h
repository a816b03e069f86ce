// The mixture-of-experts feed-forward block of the forward pass (forward.cc calls it for MoE
// layers). Internal to model/.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace tq {

struct MoeBlock;
struct ForwardWorkspace;

// x [n, hidden] += Σ_{e in top-k(router(h))} p_e · expert_e(h), h: [n, hidden].
void MoeForward(kernels::Backend& be, const MoeBlock& moe, const float* h, int64_t n,
                int64_t hidden, float* x, ForwardWorkspace& ws);

}  // namespace tq
