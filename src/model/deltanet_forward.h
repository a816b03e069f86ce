// The Gated DeltaNet mixer of one forward step (qwen3_next, qwen3_5), internal to model/:
//
//   [q | k | v], z, b, a = projections of h         (qwen3_next: in_proj_qkvz / in_proj_ba with
//                                                    rows grouped per key head, regrouped here)
//   [q | k | v] = SiLU(causal depthwise conv1d)      (conv history: the sequence's state)
//   g = -exp(A_log) · softplus(a + dt_bias),  β = sigmoid(b)
//   o = GatedDeltaNet(l2norm(q) / √dk, l2norm(k), v, g, β)   (state [Hv, dk, dv] per sequence)
//   y = out_proj(RMSNorm(o) · w · SiLU(z))           (per value head of dv)
//
// Each sequence's conv history and recurrent state are one block of its KvCache
// (KvCache::RecurrentState(layer.state_index): conv [K-1, conv_dim] then state [Hv, dk, dv]).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/layer_spec.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {

class DeltaNetStep {
 public:
  // n rows of the step; builds the regrouping gather lists of the fused layout once per step.
  DeltaNetStep(kernels::Backend& be, const ModelSpec& spec, int64_t n, ForwardWorkspace& ws);
  // Rows [begin, begin + count) belong to the sequence of `cache`.
  void AddSegment(KvCache* cache, int64_t begin, int64_t count);
  // y [n, hidden] from the normed input h [n, hidden].
  void Run(const LayerWeights& L, const DeltaNetSpec& d, const float* h, float eps, float* y);

 private:
  struct Seg {
    KvCache* cache;
    int64_t begin, count;
  };
  kernels::Backend& be_;
  ForwardWorkspace& ws_;
  int64_t n_ = 0;
  std::vector<Seg> segs_;
  // Fused layout (qwen3_next): chunk size of the qkvz gather and the list offsets in dn_idx.
  int64_t chunk_ = 1, i_qkv_ = 0, i_z_ = 0, i_ba_ = 0;
  const int32_t* idx_ = nullptr;
};

}  // namespace tq
