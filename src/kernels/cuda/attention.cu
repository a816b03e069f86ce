// Causal attention on a plain cache (ops.h Attention) on CUDA. The generic kernel (shapes the
// split kernels below do not take: other head sizes, large query groups, MLA's 576-wide latent)
// runs one CUDA block of 4 warps per (query row, head, split of the positions); warp w takes
// positions lo + w, lo + w + 4, ... with an online softmax (running max m, sum l, accumulator
// acc[head_dim] spread over the lanes: lane holds channels lane + 32 e), the four warps merge
// through shared memory, and several splits merge by log-sum-exp (AttentionMergeKernel).
// (The TurboQuant cache's attention: attention_compressed.cu.)
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/attention_pipe.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kWarps = kAttnWarps;
constexpr int kPerLane = kAttnPerLane;

template <Elem E>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionKernel(const float* __restrict__ q, int64_t pos0, const void* k, const void* v,
                    int64_t head_stride, DevAttention p, int splits, int64_t chunk,
                    float* __restrict__ part, float* __restrict__ out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float y[kMaxHeadDim], state[2];
  const int64_t i = blockIdx.x, h = blockIdx.y, split = blockIdx.z, d = p.head_dim;
  const int64_t kvh = h / (p.num_heads / p.num_kv_heads);
  const int64_t pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t lo = first + split * chunk, hi = min(pos + 1, lo + chunk);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* qh = q + (i * p.num_heads + h) * d;
  float qv[kPerLane], val[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) qv[e] = lane + 32 * e < d ? qh[lane + 32 * e] : 0.0f;
  Online o;
  for (int64_t t = lo + warp; t < hi; t += kWarps) {
    const int64_t base = kvh * head_stride + t * d;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int64_t j = lane + 32 * e;
      if (j < d) {
        dot += qv[e] * LoadElem<E>(k, base + j);
        val[e] = LoadElem<E>(v, base + j);
      } else {
        val[e] = 0.0f;
      }
    }
    Accumulate(o, WarpSum(dot) * p.scale, val);
  }
  if (splits == 1) {
    MergeWarps(o, int(d), y);
    float* oh = out + (i * p.num_heads + h) * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) oh[j] = y[j];
    return;
  }
  MergeWarps(o, int(d), y, state);  // the split's unnormalized state (m, l, acc)
  float* ps = part + ((i * p.num_heads + h) * splits + split) * (d + 2);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ps[2 + j] = y[j];
  if (threadIdx.x == 0) ps[0] = state[0], ps[1] = state[1];
}

// Split ("flash-decoding") GQA attention on a plain cache, for head_dim kD in {64, 128, 256} and
// at most kMaxQueryGroup query heads per KV head. One CUDA block of 4 warps per (query row, KV
// head, split): the G = heads / kv_heads query heads of the group share every K/V load (each KV
// head is read once per row, not G times), and a row's positions [first, pos] are cut into `splits`
// chunks of `chunk` positions so that a decode step (n = 1, a few KV heads) still has hundreds
// of blocks in flight. Lane l holds channels l·kD/32 .. (l+1)·kD/32 - 1 of the key and value;
// warp w takes positions chunk_begin + w, + 4, ... with the next position's K/V loaded before
// the current one is used. Each block merges its warps and writes, per query head, the
// unnormalized partial state (m, l, acc[kD]) to `part` (splits > 1; AttentionMergeKernel
// combines them with the log-sum-exp rule), or the normalized output (splits == 1).
template <Elem E, int kD>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionSplitKernel(const float* __restrict__ q, int64_t pos0, const void* k, const void* v,
                         int64_t head_stride, DevAttention p, int splits, int64_t chunk,
                         float* __restrict__ part, float* __restrict__ out) {
  GridLaunchDependents();      // the next product may start its set-up (TQ_LAUNCH_PDL)
  constexpr int kP = kD / 32;  // channels per lane
  __shared__ float ms[kWarps][kMaxQueryGroup], ls[kWarps][kMaxQueryGroup];
  __shared__ float accs[kWarps][kMaxQueryGroup][kD];
  const int64_t i = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int G = int(p.num_heads / p.num_kv_heads);
  const int64_t pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t lo = first + split * chunk, hi = min(pos + 1, lo + chunk);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c0 = int64_t(lane) * kP;
  float qv[kMaxQueryGroup][kP], acc[kMaxQueryGroup][kP], m[kMaxQueryGroup], l[kMaxQueryGroup];
#pragma unroll
  for (int g = 0; g < kMaxQueryGroup; ++g) {
    const float* qh = q + (i * p.num_heads + kvh * G + (g < G ? g : 0)) * kD + c0;
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      qv[g][e] = g < G ? qh[e] * p.scale : 0.0f;
      acc[g][e] = 0.0f;
    }
    m[g] = -INFINITY, l[g] = 0.0f;
  }
  const int64_t head = kvh * head_stride + c0;
  float kc[kP], vc[kP], kn[kP], vn[kP];
  auto load = [&](int64_t t, float* kk, float* vv) {
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      kk[e] = t < hi ? LoadElem<E>(k, head + t * kD + e) : 0.0f;
      vv[e] = t < hi ? LoadElem<E>(v, head + t * kD + e) : 0.0f;
    }
  };
  int64_t t = lo + warp;
  load(t, kc, vc);
  for (; t < hi; t += kWarps) {
    load(t + kWarps, kn, vn);
#pragma unroll
    for (int g = 0; g < kMaxQueryGroup; ++g) {
      if (g >= G) break;
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kP; ++e) dot += qv[g][e] * kc[e];
      const float sc = WarpSum(dot);
      const float mn = fmaxf(m[g], sc);
      const float corr = expf(m[g] - mn), pr = expf(sc - mn);
      l[g] = l[g] * corr + pr;
#pragma unroll
      for (int e = 0; e < kP; ++e) acc[g][e] = acc[g][e] * corr + pr * vc[e];
      m[g] = mn;
    }
#pragma unroll
    for (int e = 0; e < kP; ++e) kc[e] = kn[e], vc[e] = vn[e];
  }
  // Merge the warps (a warp with no position has m = -inf, l = 0).
#pragma unroll
  for (int g = 0; g < kMaxQueryGroup; ++g) {
    if (g >= G) break;
    if (lane == 0) ms[warp][g] = m[g], ls[warp][g] = l[g];
#pragma unroll
    for (int e = 0; e < kP; ++e) accs[warp][g][c0 + e] = acc[g][e];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * kD; idx += blockDim.x) {
    const int g = idx / kD, j = idx % kD;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ms[w][g]);
    float sum = 0.0f, a = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float f = ms[w][g] == -INFINITY ? 0.0f : expf(ms[w][g] - mx);
      sum += ls[w][g] * f;
      a += accs[w][g][j] * f;
    }
    const int64_t h = kvh * G + g;
    if (splits == 1) {
      out[(i * p.num_heads + h) * kD + j] = a / sum;
    } else {
      const int64_t slot = (i * p.num_heads + h) * splits + split;  // of [n, heads, splits]
      float* ps = part + slot * (kD + 2);
      ps[2 + j] = a;
      if (j == 0) ps[0] = mx, ps[1] = sum;
    }
  }
}

// out [n, heads, d] from the splits' partial states part [n, heads, splits, 2 + d]: one CUDA
// block per (row, head) (MergeSplits).
__global__ void AttentionMergeKernel(const float* __restrict__ part, int splits, int64_t d,
                                     float* __restrict__ out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float f[kMaxSplits], red[32];
  MergeSplits(part + int64_t(blockIdx.x) * splits * (d + 2), splits, d, f, red,
              out + int64_t(blockIdx.x) * d);
}

}  // namespace

namespace {

template <Elem E>
void LaunchSplit(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                 int64_t head_stride, const DevAttention& p, const SplitPlan& plan, float* part,
                 float* out, cudaStream_t s) {
  if (!LaunchPlainPipedSplit(q, n, pos0, k, v, E, head_stride, p, plan.splits, plan.chunk, part,
                             out, s)) {
    const dim3 grid(unsigned(n), unsigned(p.num_kv_heads), unsigned(plan.splits));
    auto* kernel = p.head_dim == 64    ? AttentionSplitKernel<E, 64>
                   : p.head_dim == 128 ? AttentionSplitKernel<E, 128>
                                       : AttentionSplitKernel<E, 256>;
    TQ_LAUNCH(kernel, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p, plan.splits, plan.chunk,
              part, out);
  }
  if (plan.splits > 1)
    TQ_LAUNCH(AttentionMergeKernel, unsigned(n * p.num_heads), unsigned(p.head_dim), s, part,
              plan.splits, p.head_dim, out);
}

// The split plan: one wave of the pipelined kernel's blocks where it takes the shape, else
// PlanSplits' default (either kernel runs any plan).
SplitPlan PlainPlan(int64_t n, int64_t pos0, Elem elem, const DevAttention& p) {
  const int per_sm = PlainPipedBlocksPerSm(elem, p);
  return per_sm > 0 ? PipedPlan(n, pos0, p, per_sm) : PlanSplits(n, pos0, p);
}

// The generic kernel's split plan (shapes the split kernels do not take): a row's positions cut
// so that the (row, head, split) blocks are about kTargetBlocks, at least kMinChunk positions a
// split. MLA's decode step (16 query heads on one 576-wide latent head) ran 16 blocks on the
// whole card, each over every cached position: 15 tok/s at 4,096 positions on an H100.
SplitPlan GenericPlan(int64_t n, int64_t pos0, const DevAttention& p) {
  return PlanPositionSplits(n, pos0, p.window, n * p.num_heads, kTargetBlocks);
}

// The plan the launch runs: the split kernels' where they take the shape, else the generic one's.
SplitPlan AnyPlan(int64_t n, int64_t pos0, Elem elem, const DevAttention& p) {
  const SplitPlan plan = PlainPlan(n, pos0, elem, p);
  return plan.splits > 0 ? plan : GenericPlan(n, pos0, p);
}

}  // namespace

int64_t AttentionScratchFloats(int64_t n, int64_t pos0, Elem elem, const DevAttention& p) {
  const SplitPlan plan = AnyPlan(n, pos0, elem, p);
  return plan.splits > 1 ? n * p.num_heads * plan.splits * (p.head_dim + 2) : 0;
}

void LaunchAttention(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                     Elem elem, int64_t head_stride, const DevAttention& p, float* scratch,
                     float* out, cudaStream_t s) {
  if (PrefillAttention(q, n, pos0, k, v, elem, head_stride, p, out, s)) return;
  const SplitPlan plan = PlainPlan(n, pos0, elem, p);
  if (plan.splits > 0) {
    switch (elem) {
      case Elem::kF32:
        return LaunchSplit<Elem::kF32>(q, n, pos0, k, v, head_stride, p, plan, scratch, out, s);
      case Elem::kF16:
        return LaunchSplit<Elem::kF16>(q, n, pos0, k, v, head_stride, p, plan, scratch, out, s);
      case Elem::kBF16:
        return LaunchSplit<Elem::kBF16>(q, n, pos0, k, v, head_stride, p, plan, scratch, out, s);
    }
  }
  SplitPlan g = GenericPlan(n, pos0, p);
  if (scratch == nullptr) g = {1, pos0 + n};  // (the caller sized no scratch: one split)
  const dim3 grid(unsigned(n), unsigned(p.num_heads), unsigned(g.splits));
  switch (elem) {
    case Elem::kF32:
      TQ_LAUNCH(AttentionKernel<Elem::kF32>, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p,
                g.splits, g.chunk, scratch, out);
      break;
    case Elem::kF16:
      TQ_LAUNCH(AttentionKernel<Elem::kF16>, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p,
                g.splits, g.chunk, scratch, out);
      break;
    case Elem::kBF16:
      TQ_LAUNCH(AttentionKernel<Elem::kBF16>, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p,
                g.splits, g.chunk, scratch, out);
      break;
  }
  if (g.splits > 1)  // whole warps for the merge's block reductions
    TQ_LAUNCH(AttentionMergeKernel, unsigned(n * p.num_heads),
              unsigned((p.head_dim + 31) / 32 * 32), s, scratch, g.splits, p.head_dim, out);
}

}  // namespace tq::kernels::cuda
