// Causal attention (ops.h Attention, kv_ops.h CompressedAttention) on CUDA. One CUDA block of
// 4 warps per (query row, head); warp w takes positions first + w, first + w + 4, ... with an
// online softmax (running max m, sum l, accumulator acc[head_dim] spread over the lanes: lane
// holds channels lane + 32 e), then the four warps merge through shared memory.
//
// The compressed kernel scores keys straight from their codes in the rotated domain: the query
// is gathered into the key channel order, rotated (R_k) and, with a QJL sketch, projected (S q')
// in shared memory once per block; values accumulate in the rotated domain, get the centering
// offset back, are un-rotated (R_vᵀ) and scattered to the model's channel order.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = int(kMaxHeadDim / 32);  // channels per lane

struct Online {
  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane] = {};
};

// Adds a position with score s and value channels val (this lane's) to the running softmax.
__device__ __forceinline__ void Accumulate(Online& o, float s, const float* val) {
  const float mn = fmaxf(o.m, s);
  const float corr = expf(o.m - mn), p = expf(s - mn);
  o.l = o.l * corr + p;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) o.acc[e] = o.acc[e] * corr + p * val[e];
  o.m = mn;
}

// Merges the warps' states; y[j] (shared, head_dim) = Σ_w acc_w[j] e^(m_w - M) / L.
__device__ void MergeWarps(const Online& o, int d, float* y) {
  __shared__ float ms[kWarps], ls[kWarps];
  __shared__ float accs[kWarps][kMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) ms[warp] = o.m, ls[warp] = o.l;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e)
    if (lane + 32 * e < d) accs[warp][lane + 32 * e] = o.acc[e];
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ms[w]);
  float f[kWarps], sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    f[w] = ms[w] == -INFINITY ? 0.0f : expf(ms[w] - mx);
    sum += ls[w] * f[w];
  }
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += accs[w][j] * f[w];
    y[j] = v / sum;
  }
  __syncthreads();
}

template <Elem E>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionKernel(const float* __restrict__ q, int64_t pos0, const void* k, const void* v,
                    int64_t head_stride, DevAttention p, float* __restrict__ out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float y[kMaxHeadDim];
  const int64_t i = blockIdx.x, h = blockIdx.y, d = p.head_dim;
  const int64_t kvh = h / (p.num_heads / p.num_kv_heads);
  const int64_t pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* qh = q + (i * p.num_heads + h) * d;
  float qv[kPerLane], val[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) qv[e] = lane + 32 * e < d ? qh[lane + 32 * e] : 0.0f;
  Online o;
  for (int64_t t = first + warp; t <= pos; t += kWarps) {
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
  MergeWarps(o, int(d), y);
  float* oh = out + (i * p.num_heads + h) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) oh[j] = y[j];
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
constexpr int kMaxQueryGroup = 8;

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
// block per (row, head), out = Σ_s acc_s e^(m_s - M) / Σ_s l_s e^(m_s - M), M = max_s m_s. The
// splits' (m, l) are read by the block's threads in parallel and their weights kept in shared
// memory, so each channel's sum issues all its loads at once (a loop that read one split after
// the other waited ~20 L2 round trips: 5.8 µs a layer at 512 positions on the H200).
constexpr int kMaxSplits = 528;  // PlanSplits' kTargetBlocks

__global__ void AttentionMergeKernel(const float* __restrict__ part, int splits, int64_t d,
                                     float* __restrict__ out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float f[kMaxSplits], red[32];
  const float* ps = part + int64_t(blockIdx.x) * splits * (d + 2);
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
    out[int64_t(blockIdx.x) * d + j] = a / sum;
  }
}

// Channel j of a coded vector (codes, fp16 scales) in format f with level tables tab[segment].
__device__ __forceinline__ float CodedAt(const DevCodeFormat& f, const float (*tab)[256],
                                         const uint8_t* codes, const uint16_t* scales, int64_t j) {
  const int s = (f.num_segments == 2 && j >= f.seg[1].begin) ? 1 : 0;
  const DevSegment& seg = f.seg[s];
  const int code = CodeAt(seg.format, codes + seg.byte_offset, j - seg.begin, seg.end - seg.begin);
  return F16(__ldg(scales + j / f.group)) * tab[s][code];
}

__global__ void __launch_bounds__(kWarps * 32)
    CompressedAttentionKernel(const float* __restrict__ q, int64_t pos0, DevCompressedKv kv,
                              DevAttention p, float* __restrict__ out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float qr[kMaxHeadDim], y[kMaxHeadDim];
  __shared__ float sq[1024];
  __shared__ float ktab[2][256], vtab[2][256];
  const int64_t i = blockIdx.x, h = blockIdx.y, d = p.head_dim;
  const int64_t kvh = h / (p.num_heads / p.num_kv_heads);
  const int64_t pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* qh = q + (i * p.num_heads + h) * d;

  // q' = R_k P q, and S q'.
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t src = kv.k_order ? kv.k_order[kvh * d + j] : j;
    qr[j] = qh[src] * float(kv.k_rot.signs[j]);
  }
  for (int s = 0; s < 2; ++s) {
    for (int c = threadIdx.x; c < 256; c += blockDim.x) {
      ktab[s][c] = s < kv.kf.num_segments && c < kv.kf.seg[s].levels ? kv.kf.seg[s].table[c] : 0.0f;
      vtab[s][c] = s < kv.vf.num_segments && c < kv.vf.seg[s].levels ? kv.vf.seg[s].table[c] : 0.0f;
    }
  }
  SharedFwht(qr, int(d), int(kv.k_rot.block));
  const float kscale = rsqrtf(float(kv.k_rot.block));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) qr[j] *= kscale;
  __syncthreads();
  if (kv.qjl_matrix) {
    for (int64_t r = threadIdx.x; r < kv.qjl_m; r += blockDim.x) {
      const float* row = kv.qjl_matrix + r * d;
      float acc = 0.0f;
      for (int64_t j = 0; j < d; ++j) acc += row[j] * qr[j];
      sq[r] = acc;
    }
    __syncthreads();
  }

  float qv[kPerLane], val[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) qv[e] = lane + 32 * e < d ? qr[lane + 32 * e] : 0.0f;
  const int64_t sign_bytes = (kv.qjl_m + 7) / 8;
  Online o;
  for (int si = 0; si < kv.num_spans; ++si) {
    const DevSpan& s = kv.spans[si];
    const int64_t lo = max(first, s.begin), hi = min(pos + 1, s.end);
    for (int64_t t = lo + warp; t < hi; t += kWarps) {
      const int64_t slot = kvh * s.head_stride + (t - s.begin);
      float dot = 0.0f;
      if (s.coded) {
        const uint8_t* kc = s.k_codes + slot * kv.kf.code_bytes;
        const uint16_t* ks = s.k_scales + slot * (kv.kf.dim / kv.kf.group);
        const uint8_t* vc = s.v_codes + slot * kv.vf.code_bytes;
        const uint16_t* vs = s.v_scales + slot * (kv.vf.dim / kv.vf.group);
#pragma unroll
        for (int e = 0; e < kPerLane; ++e) {
          const int64_t j = lane + 32 * e;
          val[e] = 0.0f;
          if (j < d) {
            dot += qv[e] * CodedAt(kv.kf, ktab, kc, ks, j);
            val[e] = CodedAt(kv.vf, vtab, vc, vs, j);
          }
        }
        dot = WarpSum(dot);
        if (kv.qjl_matrix) {
          const uint8_t* bits = s.k_qjl + slot * sign_bytes;
          float sd = 0.0f;
          for (int64_t r = lane; r < kv.qjl_m; r += 32)
            sd += (bits[r >> 3] >> (r & 7) & 1) ? sq[r] : -sq[r];
          dot += F16(s.k_qjl_norm[slot]) * kv.qjl_factor * WarpSum(sd);
        }
      } else {
        const uint16_t* k16 = s.k16 + slot * d;
        const uint16_t* v16 = s.v16 + slot * d;
#pragma unroll
        for (int e = 0; e < kPerLane; ++e) {
          const int64_t j = lane + 32 * e;
          val[e] = 0.0f;
          if (j < d) {
            dot += qv[e] * F16(__ldg(k16 + j));
            val[e] = F16(__ldg(v16 + j));
          }
        }
        dot = WarpSum(dot);
      }
      Accumulate(o, dot * p.scale, val);
    }
  }
  MergeWarps(o, int(d), y);
  // y + μ'_V, then R_vᵀ y = diag(s) H y / √b, then Pᵀ.
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    if (kv.v_offset) y[j] += kv.v_offset[kvh * d + j];
  SharedFwht(y, int(d), int(kv.v_rot.block));
  const float vscale = rsqrtf(float(kv.v_rot.block));
  float* oh = out + (i * p.num_heads + h) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t dst = kv.v_order ? kv.v_order[kvh * d + j] : j;
    oh[dst] = y[j] * float(kv.v_rot.signs[j]) * vscale;
  }
}

}  // namespace

namespace {

// The split plan of AttentionSplitKernel for n rows ending at pos0 + n - 1: about kTargetBlocks
// blocks (4 per SM of a 132-SM part) and at least kMinChunk positions a split.
constexpr int64_t kTargetBlocks = kMaxSplits, kMinChunk = 32;

struct SplitPlan {
  int splits = 0;  // 0: not eligible (the generic kernel runs)
  int64_t chunk = 0;
};

SplitPlan PlanSplits(int64_t n, int64_t pos0, const DevAttention& p) {
  const int64_t g = p.num_heads / p.num_kv_heads;
  if ((p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) || g > kMaxQueryGroup) return {};
  const int64_t longest =
      p.window > 0 ? std::min(p.window, pos0 + n) : pos0 + n;  // positions a row
  const int64_t units = n * p.num_kv_heads;
  int64_t splits = std::max(int64_t(1), std::min((kTargetBlocks + units - 1) / units,
                                                 (longest + kMinChunk - 1) / kMinChunk));
  const int64_t chunk = (longest + splits - 1) / splits;
  splits = (longest + chunk - 1) / chunk;
  return {int(splits), chunk};
}

template <Elem E>
void LaunchSplit(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                 int64_t head_stride, const DevAttention& p, const SplitPlan& plan, float* part,
                 float* out, cudaStream_t s) {
  const dim3 grid(unsigned(n), unsigned(p.num_kv_heads), unsigned(plan.splits));
  auto* kernel = p.head_dim == 64    ? AttentionSplitKernel<E, 64>
                 : p.head_dim == 128 ? AttentionSplitKernel<E, 128>
                                     : AttentionSplitKernel<E, 256>;
  TQ_LAUNCH(kernel, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p, plan.splits, plan.chunk,
            part, out);
  if (plan.splits > 1)
    TQ_LAUNCH(AttentionMergeKernel, unsigned(n * p.num_heads), unsigned(p.head_dim), s, part,
              plan.splits, p.head_dim, out);
}

}  // namespace

int64_t AttentionScratchFloats(int64_t n, int64_t pos0, const DevAttention& p) {
  const SplitPlan plan = PlanSplits(n, pos0, p);
  return plan.splits > 1 ? n * p.num_heads * plan.splits * (p.head_dim + 2) : 0;
}

void LaunchAttention(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                     Elem elem, int64_t head_stride, const DevAttention& p, float* scratch,
                     float* out, cudaStream_t s) {
  if (PrefillAttention(q, n, pos0, k, v, elem, head_stride, p, out, s)) return;
  const SplitPlan plan = PlanSplits(n, pos0, p);
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
  const dim3 grid(unsigned(n), unsigned(p.num_heads));
  switch (elem) {
    case Elem::kF32:
      TQ_LAUNCH(AttentionKernel<Elem::kF32>, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p,
                out);
      return;
    case Elem::kF16:
      TQ_LAUNCH(AttentionKernel<Elem::kF16>, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p,
                out);
      return;
    case Elem::kBF16:
      TQ_LAUNCH(AttentionKernel<Elem::kBF16>, grid, kWarps * 32, s, q, pos0, k, v, head_stride, p,
                out);
      return;
  }
}

void LaunchCompressedAttention(const float* q, int64_t n, int64_t pos0, const DevCompressedKv& kv,
                               const DevAttention& p, float* out, cudaStream_t s) {
  const dim3 grid(unsigned(n), unsigned(p.num_heads));
  TQ_LAUNCH(CompressedAttentionKernel, grid, kWarps * 32, s, q, pos0, kv, p, out);
}

}  // namespace tq::kernels::cuda
