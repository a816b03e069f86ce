// The recurrent mixers of one forward step, internal to model/. Each sequence's conv history and
// recurrent state are one block of its KvCache (KvCache::RecurrentState(layer.state_index)):
// conv [K-1, conv_dim] first, then the mixer's state.
//
// Gated DeltaNet (qwen3_next, qwen3_5; deltanet_forward.cc):
//
//   [q | k | v], z, b, a = projections of h         (qwen3_next: in_proj_qkvz / in_proj_ba with
//                                                    rows grouped per key head, regrouped here)
//   [q | k | v] = SiLU(causal depthwise conv1d)      (conv history: the sequence's state)
//   g = -exp(A_log) · softplus(a + dt_bias),  β = sigmoid(b)
//   o = GatedDeltaNet(l2norm(q) / √dk, l2norm(k), v, g, β)   (state [Hv, dk, dv] per sequence)
//   y = out_proj(RMSNorm(o) · w · SiLU(z))           (per value head of dv)
//
// Mamba-2 (nemotron_h; mamba_forward.cc):
//
//   z, [x | B | C], dt = in_proj(h)                  (row blocks of in_proj, split at load)
//   [x | B | C] = SiLU(causal depthwise conv1d + bias)
//   dt = clamp(softplus(dt + dt_bias), time_step_limit)
//   y = SSD(x, B, C, dt, A = -exp(A_log)) + D · x     (state [H, P, N] per sequence)
//   y = out_proj(RMSNorm_groups(y · SiLU(z)) · w)   (n_groups groups of the inner width)
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/layer_spec.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {

class RecurrentStep {
 public:
  // n rows of the step; builds the regrouping gather lists of the fused layout once per step.
  RecurrentStep(kernels::Backend& be, const ModelSpec& spec, int64_t n, ForwardWorkspace& ws);
  // Rows [begin, begin + count) belong to the sequence of `cache`.
  void AddSegment(KvCache* cache, int64_t begin, int64_t count);
  // y [n, hidden] from the normed input h [n, hidden].
  void RunDeltaNet(const LayerWeights& L, const DeltaNetSpec& d, const float* h, float eps,
                   float* y);
  void RunMamba2(const LayerWeights& L, const Mamba2Spec& m, const float* h, float* y);

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
