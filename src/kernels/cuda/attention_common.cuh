// What the attention kernels share (attention.cu: plain caches; attention_compressed.cu:
// TurboQuant caches): the per-warp online softmax, the warps' merge, the split plan of the
// flash-decoding kernels and the log-sum-exp merge of their splits.
#pragma once

#include <algorithm>

#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {

inline constexpr int kAttnWarps = 4;                        // warps a block
inline constexpr int kAttnPerLane = int(kMaxHeadDim / 32);  // channels a lane, generic kernels
inline constexpr int kMaxQueryGroup = 8;                    // query heads a KV head, split kernels
inline constexpr int kMaxSplits = 528;                      // kTargetBlocks below
inline constexpr int64_t kTargetBlocks = kMaxSplits, kMinChunk = 32;

// One warp's online softmax: running max m, sum l, accumulator acc[head_dim] spread over the
// lanes (lane holds channels lane + 32 e).
struct Online {
  float m = -INFINITY, l = 0.0f;
  float acc[kAttnPerLane] = {};
};

// Adds a position with score s and value channels val (this lane's) to the running softmax.
__device__ __forceinline__ void Accumulate(Online& o, float s, const float* val) {
  const float mn = fmaxf(o.m, s);
  const float corr = expf(o.m - mn), p = expf(s - mn);
  o.l = o.l * corr + p;
#pragma unroll
  for (int e = 0; e < kAttnPerLane; ++e) o.acc[e] = o.acc[e] * corr + p * val[e];
  o.m = mn;
}

// Merges the warps' states; y[j] (shared, head_dim) = Σ_w acc_w[j] e^(m_w - M) / L — or, with
// `state` (shared, 2 floats), the unnormalized Σ_w acc_w[j] e^(m_w - M) with state = (M, L): a
// split's partial state for MergeSplits (M = -inf, L = 0 when no warp saw a position).
__device__ inline void MergeWarps(const Online& o, int d, float* y, float* state = nullptr) {
  __shared__ float ms[kAttnWarps], ls[kAttnWarps];
  __shared__ float accs[kAttnWarps][kMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) ms[warp] = o.m, ls[warp] = o.l;
#pragma unroll
  for (int e = 0; e < kAttnPerLane; ++e)
    if (lane + 32 * e < d) accs[warp][lane + 32 * e] = o.acc[e];
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, ms[w]);
  float f[kAttnWarps], sum = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) {
    f[w] = ms[w] == -INFINITY ? 0.0f : expf(ms[w] - mx);
    sum += ls[w] * f[w];
  }
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) v += accs[w][j] * f[w];
    y[j] = state ? v : v / sum;
  }
  if (state && threadIdx.x == 0) state[0] = mx, state[1] = sum;
  __syncthreads();
}

// dst[0..d) = Σ_s acc_s e^(m_s - M) / Σ_s l_s e^(m_s - M), M = max_s m_s, from one (row, head)'s
// split states ps [splits, 2 + d] = (m, l, acc[d]); all threads of the block. The splits' (m, l)
// are read by the block's threads in parallel and their weights kept in shared memory `f`
// (kMaxSplits floats; `red` 32), so each channel's sum issues all its loads at once (a loop that
// read one split after the other waited ~20 L2 round trips: 5.8 µs a layer at 512 positions).
__device__ inline void MergeSplits(const float* __restrict__ ps, int splits, int64_t d, float* f,
                                   float* red, float* dst) {
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) mx = fmaxf(mx, ps[s * (d + 2)]);
  mx = BlockMax(mx, red);
  float sum = 0.0f;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    const float m = ps[s * (d + 2)];
    f[s] = m == -INFINITY ? 0.0f : expf(m - mx);
    sum += ps[s * (d + 2) + 1] * f[s];
  }
  sum = BlockSum(sum, red);  // (its barriers publish f)
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float a = 0.0f;
#pragma unroll 8
    for (int s = 0; s < splits; ++s) a += ps[s * (d + 2) + 2 + j] * f[s];
    dst[j] = a / sum;
  }
}

// The split plan of the flash-decoding kernels for n rows ending at pos0 + n - 1: about `target`
// blocks (<= kMaxSplits a row and head; default 4 per SM of a 132-SM part) and at least
// kMinChunk positions a split.
struct SplitPlan {
  int splits = 0;  // 0: not eligible (the generic kernel runs)
  int64_t chunk = 0;
};

// A row's positions (the longest row's: pos0 + n, or the window) cut so that `units` blocks
// (rows × heads a block) times the splits are about `target`.
inline SplitPlan PlanPositionSplits(int64_t n, int64_t pos0, int64_t window, int64_t units,
                                    int64_t target) {
  const int64_t longest = window > 0 ? std::min(window, pos0 + n) : pos0 + n;  // positions a row
  int64_t splits = std::max(int64_t(1), std::min({(target + units - 1) / units, int64_t(kMaxSplits),
                                                  (longest + kMinChunk - 1) / kMinChunk}));
  const int64_t chunk = (longest + splits - 1) / splits;
  splits = (longest + chunk - 1) / chunk;
  return {int(splits), chunk};
}

inline SplitPlan PlanSplits(int64_t n, int64_t pos0, const DevAttention& p,
                            int64_t target = kTargetBlocks) {
  const int64_t g = p.num_heads / p.num_kv_heads;
  if ((p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) || g > kMaxQueryGroup) return {};
  return PlanPositionSplits(n, pos0, p.window, n * p.num_kv_heads, target);
}

}  // namespace tq::kernels::cuda
