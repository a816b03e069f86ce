// The mixture-of-experts feed-forward block of the forward pass (forward.cc calls it for MoE
// layers). Internal to model/ (plan's workspace model reads kMinGroupedSlots).
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "model/layer_spec.h"

namespace tq {

class ExpertCache;
struct MoeBlock;
struct ForwardWorkspace;

// With an expert cache: where layer `layer` gets its experts from, and what to prefetch.
struct MoeStreaming {
  ExpertCache* cache = nullptr;  // null: the experts are resident
  int64_t layer = 0;
  // The next MoE layer (for the prefetch prediction: its router applied to RMSNorm(x, its
  // ffn_norm), x the residual entering this block); null when there is none.
  const MoeBlock* next = nullptr;
  int64_t next_layer = -1;
  const float* next_ffn_norm = nullptr;  // [hidden] in the backend's memory
  float eps = 0;
};

// Resident experts run as grouped matmuls in runs of at most max(n, kMinGroupedSlots) slots
// (decode: a token's top-k experts in one run); plan's workspace model counts the same rows.
inline constexpr int64_t kMinGroupedSlots = 64;

// act(gate) * up into g [count] (the layer's activation: SiLU, GELU-tanh or gpt_oss's clamped
// SwiGLU); forward.cc's dense MLP and the experts share it.
void GatedAct(kernels::Backend& be, Activation act, float* g, const float* u, int64_t count);

// x [n, hidden] += Σ_{e in top-k(router(h))} p_e · expert_e(h), h: [n, hidden]. Streamed or
// not, every expert runs over the same rows in the same order: the results are bit-identical.
void MoeForward(kernels::Backend& be, const MoeBlock& moe, const float* h, int64_t n,
                int64_t hidden, float* x, ForwardWorkspace& ws, const MoeStreaming& stream = {});

}  // namespace tq
