// Causal attention on the TurboQuant cache (kv_ops.h CompressedAttention) on CUDA. Keys are
// scored straight from their codes in the rotated domain: the query is gathered into the key
// channel order, rotated (R_k) and, with a QJL sketch, projected (S q'); values accumulate in the
// rotated domain, get the centering offset back, are un-rotated (R_vᵀ) and scattered to the
// model's channel order.
//
// head_dim 64/128/256 with at most 8 query heads per KV head (every model here) take three
// kernels ("flash-decoding", as the plain cache's split kernel in attention.cu):
//   1. CompressedQueryKernel, a block per (row, head): q' = R_k P q and S q' into scratch;
//   2. CompressedSplitKernel, a block of 4 warps per (row, KV head, split of the positions): the
//      group's G query heads share each decoded key and value (a KV head's codes are read and
//      expanded once per row, not G times), warp w takes positions chunk_begin + w, + 4, ...
//      with an online softmax per query head, and the block writes each head's unnormalized
//      state (m, l, acc[d], rotated domain) for its split;
//   3. CompressedMergeKernel, a block per (row, head): the log-sum-exp merge of the splits,
//      + μ'_V, R_vᵀ, the channel order.
// A decode step (n = 1, 8 KV heads) so has ~500 blocks in flight instead of 32. Other shapes:
// one block per (query row, head), the whole row's positions, the same arithmetic.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/attention_compressed.cuh"
#include "kernels/cuda/attention_pipe.cuh"

namespace tq::kernels::cuda {
namespace {

// qr[0..d) (shared, 16-byte aligned) = R_k P q_h of query row qh; all threads; ends with a barrier.
__device__ __forceinline__ void RotateQuery(const DevCompressedKv& kv, const float* qh, int64_t kvh,
                                            int64_t d, float* qr) {
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t src = kv.k_order ? kv.k_order[kvh * d + j] : j;
    qr[j] = qh[src] * float(kv.k_rot.signs[j]);
  }
  SharedFwht(qr, int(d), int(kv.k_rot.block));
  const float kscale = rsqrtf(float(kv.k_rot.block));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) qr[j] *= kscale;
  __syncthreads();
}

// out[0..d) of one (row, head) from y (shared, the merged rotated-domain value): y + μ'_V, then
// R_vᵀ y = diag(s) H y / √b, then Pᵀ. All threads.
__device__ __forceinline__ void UnrotateValue(const DevCompressedKv& kv, int64_t kvh, int64_t d,
                                              float* y, float* oh) {
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    if (kv.v_offset) y[j] += kv.v_offset[kvh * d + j];
  SharedFwht(y, int(d), int(kv.v_rot.block));
  const float vscale = rsqrtf(float(kv.v_rot.block));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t dst = kv.v_order ? kv.v_order[kvh * d + j] : j;
    oh[dst] = y[j] * float(kv.v_rot.signs[j]) * vscale;
  }
}

// --- the generic kernel: one block per (query row, head) ---
__global__ void __launch_bounds__(kAttnWarps * 32)
    CompressedAttentionKernel(const float* __restrict__ q, int64_t pos0, DevCompressedKv kv,
                              DevAttention p, float* __restrict__ out) {
  GridLaunchDependents();                   // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float4 qr_4[kMaxHeadDim / 4];  // (16-byte aligned: SharedFwht)
  float* qr = reinterpret_cast<float*>(qr_4);
  __shared__ float4 y_4[kMaxHeadDim / 4];  // (16-byte aligned: SharedFwht)
  float* y = reinterpret_cast<float*>(y_4);
  __shared__ float sq[1024];
  __shared__ float ktab[2][256], vtab[2][256];
  const int64_t i = blockIdx.x, h = blockIdx.y, d = p.head_dim;
  const int64_t kvh = h / (p.num_heads / p.num_kv_heads);
  const int64_t pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  LoadTables(kv, ktab, vtab);
  RotateQuery(kv, q + (i * p.num_heads + h) * d, kvh, d, qr);
  if (kv.qjl_matrix) {
    for (int64_t r = threadIdx.x; r < kv.qjl_m; r += blockDim.x) {
      const float* row = kv.qjl_matrix + r * d;
      float acc = 0.0f;
      for (int64_t j = 0; j < d; ++j) acc += row[j] * qr[j];
      sq[r] = acc;
    }
    __syncthreads();
  }

  float qv[kAttnPerLane], val[kAttnPerLane];
#pragma unroll
  for (int e = 0; e < kAttnPerLane; ++e) qv[e] = lane + 32 * e < d ? qr[lane + 32 * e] : 0.0f;
  const int64_t sign_bytes = (kv.qjl_m + 7) / 8;
  Online o;
  for (int si = 0; si < kv.num_spans; ++si) {
    const DevSpan& s = kv.spans[si];
    const int64_t lo = max(first, s.begin), hi = min(pos + 1, s.end);
    for (int64_t t = lo + warp; t < hi; t += kAttnWarps) {
      const int64_t slot = kvh * s.head_stride + (t - s.begin);
      float dot = 0.0f;
      if (s.coded) {
        const uint8_t* kc = s.k_codes + slot * kv.kf.code_bytes;
        const uint16_t* ks = s.k_scales + slot * (kv.kf.dim / kv.kf.group);
        const uint8_t* vc = s.v_codes + slot * kv.vf.code_bytes;
        const uint16_t* vs = s.v_scales + slot * (kv.vf.dim / kv.vf.group);
#pragma unroll
        for (int e = 0; e < kAttnPerLane; ++e) {
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
        for (int e = 0; e < kAttnPerLane; ++e) {
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
  UnrotateValue(kv, kvh, d, y, out + (i * p.num_heads + h) * d);
}

// --- the split kernels ---

// qp [n, heads, d + m]: q' = R_k P q (d floats), then S q' (m floats, with a QJL sketch).
__global__ void __launch_bounds__(128)
    CompressedQueryKernel(const float* __restrict__ q, DevCompressedKv kv, DevAttention p,
                          float* __restrict__ qp) {
  GridLaunchDependents();
  __shared__ float4 qr_4[kMaxHeadDim / 4];  // (16-byte aligned: SharedFwht)
  float* qr = reinterpret_cast<float*>(qr_4);
  const int64_t i = blockIdx.x, h = blockIdx.y, d = p.head_dim;
  const int64_t kvh = h / (p.num_heads / p.num_kv_heads);
  RotateQuery(kv, q + (i * p.num_heads + h) * d, kvh, d, qr);
  float* o = qp + (i * p.num_heads + h) * (d + kv.qjl_m);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) o[j] = qr[j];
  for (int64_t r = threadIdx.x; r < kv.qjl_m; r += blockDim.x) {
    const float* row = kv.qjl_matrix + r * d;
    float acc = 0.0f;
    for (int64_t j = 0; j < d; ++j) acc += row[j] * qr[j];
    o[d + r] = acc;
  }
}

// part [n, heads, splits, 2 + kD] from qp (CompressedQueryKernel). Lane l holds channels
// l + 32 e of a key / value (e < kD / 32): within a 32-code unit lane l decodes code l, so a
// warp's loads of one vector fall on the same few bytes. Positions [lo, hi) of the split, each
// span's part of them (sink and window spans stored f16, the middle coded). A warp takes kT
// positions at a time (their loads in flight together, one softmax rescale per tile) and keeps
// the running max in log2 units (exp2f; the state it writes is in natural units). KF / VF: the
// key / value code format known at compile time (DecodeLane), or kAnyFormat.
template <int kD, int KF, int VF>
__global__ void __launch_bounds__(kAttnWarps * 32)
    CompressedSplitKernel(const float* __restrict__ qp, int64_t pos0, DevCompressedKv kv,
                          DevAttention p, int64_t chunk, float* __restrict__ part) {
  GridLaunchDependents();
  constexpr int kP = kD / 32;
  constexpr int kT = kD <= 128 ? 4 : 2;  // positions a warp holds at once
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  __shared__ float ms[kAttnWarps][kMaxQueryGroup], ls[kAttnWarps][kMaxQueryGroup];
  __shared__ float accs[kAttnWarps][kMaxQueryGroup][kD];
  __shared__ float ktab[2][256], vtab[2][256];
  const int64_t i = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int splits = int(gridDim.z);
  const int G = int(p.num_heads / p.num_kv_heads);
  const int64_t pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t lo = first + split * chunk, hi = min(pos + 1, lo + chunk);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t qstride = kD + kv.qjl_m;
  const float* qg = qp + (i * p.num_heads + kvh * G) * qstride;  // the group's first head
  const float scale2 = p.scale * kLog2e;                         // scores in log2 units
  LoadTables(kv, ktab, vtab);
  float qv[kMaxQueryGroup][kP], acc[kMaxQueryGroup][kP], m[kMaxQueryGroup], l[kMaxQueryGroup];
#pragma unroll
  for (int g = 0; g < kMaxQueryGroup; ++g) {
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      qv[g][e] = g < G ? qg[g * qstride + lane + 32 * e] : 0.0f;
      acc[g][e] = 0.0f;
    }
    m[g] = -INFINITY, l[g] = 0.0f;
  }
  const int64_t kgroups = kv.kf.dim / kv.kf.group, vgroups = kv.vf.dim / kv.vf.group;
  int kgi[kP], vgi[kP];  // the scale group of channel 32 e (the fast formats' groups)
#pragma unroll
  for (int e = 0; e < kP; ++e)
    kgi[e] = int(32 * e / kv.kf.group), vgi[e] = int(32 * e / kv.vf.group);
  __syncthreads();  // the tables
  const int64_t sign_bytes = (kv.qjl_m + 7) / 8;
  for (int si = 0; si < kv.num_spans; ++si) {
    const DevSpan& s = kv.spans[si];
    const int64_t a = max(lo, s.begin), b = min(hi, s.end);
    const bool qjl = s.coded && kv.qjl_matrix;
    for (int64_t t0 = a + warp * kT; t0 < b; t0 += kAttnWarps * kT) {
      // The tile's keys and values, every load issued before the first use: a position past b
      // reloads the last one (its score is masked below), and the span's kind is one branch.
      int64_t slot[kT];
#pragma unroll
      for (int u = 0; u < kT; ++u) slot[u] = kvh * s.head_stride + (min(t0 + u, b - 1) - s.begin);
      float kk[kT][kP], vv[kT][kP], qjl_scale[kT];
      if (s.coded) {
#pragma unroll
        for (int u = 0; u < kT; ++u) {
          DecodeLane<kP, KF>(kv.kf, ktab, s.k_codes + slot[u] * kv.kf.code_bytes,
                             s.k_scales + slot[u] * kgroups, kgi, lane, kk[u]);
          DecodeLane<kP, VF>(kv.vf, vtab, s.v_codes + slot[u] * kv.vf.code_bytes,
                             s.v_scales + slot[u] * vgroups, vgi, lane, vv[u]);
          qjl_scale[u] = qjl ? F16(s.k_qjl_norm[slot[u]]) * kv.qjl_factor : 0.0f;
        }
      } else {
#pragma unroll
        for (int u = 0; u < kT; ++u) {
          const uint16_t* k16 = s.k16 + slot[u] * kD;
          const uint16_t* v16 = s.v16 + slot[u] * kD;
#pragma unroll
          for (int e = 0; e < kP; ++e) {
            kk[u][e] = F16(__ldg(k16 + lane + 32 * e));
            vv[u][e] = F16(__ldg(v16 + lane + 32 * e));
          }
          qjl_scale[u] = 0.0f;
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxQueryGroup; ++g) {
        if (g >= G) break;
        float sc[kT];
#pragma unroll
        for (int u = 0; u < kT; ++u) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < kP; ++e) dot += qv[g][e] * kk[u][e];
          sc[u] = dot;
        }
#pragma unroll
        for (int u = 0; u < kT; ++u) sc[u] = WarpSum(sc[u]);
        if (qjl) {
          const float* sq = qg + g * qstride + kD;
#pragma unroll
          for (int u = 0; u < kT; ++u) {
            const uint8_t* bits = s.k_qjl + slot[u] * sign_bytes;
            float sd = 0.0f;
            for (int64_t r = lane; r < kv.qjl_m; r += 32)
              sd += (bits[r >> 3] >> (r & 7) & 1) ? sq[r] : -sq[r];
            sc[u] += qjl_scale[u] * WarpSum(sd);
          }
        }
        float mx = m[g];
#pragma unroll
        for (int u = 0; u < kT; ++u) {
          sc[u] = t0 + u < b ? sc[u] * scale2 : -INFINITY;
          mx = fmaxf(mx, sc[u]);
        }
        const float corr = exp2f(m[g] - mx);  // position t0 < b: mx is finite
        l[g] *= corr;
#pragma unroll
        for (int e = 0; e < kP; ++e) acc[g][e] *= corr;
#pragma unroll
        for (int u = 0; u < kT; ++u) {
          const float pr = exp2f(sc[u] - mx);
          l[g] += pr;
#pragma unroll
          for (int e = 0; e < kP; ++e) acc[g][e] += pr * vv[u][e];
        }
        m[g] = mx;
      }
    }
  }
  // Merge the warps (a warp with no position has m = -inf, l = 0) into the split's state.
#pragma unroll
  for (int g = 0; g < kMaxQueryGroup; ++g) {
    if (g >= G) break;
    if (lane == 0) ms[warp][g] = m[g] * kLn2, ls[warp][g] = l[g];
#pragma unroll
    for (int e = 0; e < kP; ++e) accs[warp][g][lane + 32 * e] = acc[g][e];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * kD; idx += blockDim.x) {
    const int g = idx / kD, j = idx % kD;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, ms[w][g]);
    float sum = 0.0f, av = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) {
      const float f = ms[w][g] == -INFINITY ? 0.0f : expf(ms[w][g] - mx);
      sum += ls[w][g] * f;
      av += accs[w][g][j] * f;
    }
    const int64_t slot = (i * p.num_heads + kvh * G + g) * splits + split;  // of [n, heads, splits]
    float* ps = part + slot * (kD + 2);
    ps[2 + j] = av;
    if (j == 0) ps[0] = mx, ps[1] = sum;
  }
}

// out [n, heads, d] from part [n, heads, splits, 2 + d]: a block per (row, head).
__global__ void CompressedMergeKernel(const float* __restrict__ part, int splits,
                                      DevCompressedKv kv, DevAttention p, float* __restrict__ out) {
  GridLaunchDependents();
  __shared__ float f[kMaxSplits], red[32];
  __shared__ float4 y_4[kMaxHeadDim / 4];  // (16-byte aligned: SharedFwht)
  float* y = reinterpret_cast<float*>(y_4);
  const int64_t rh = blockIdx.x, d = p.head_dim;
  const int64_t kvh = (rh % p.num_heads) / (p.num_heads / p.num_kv_heads);
  MergeSplits(part + rh * splits * (d + 2), splits, d, f, red, y);
  UnrotateValue(kv, kvh, d, y, out + rh * d);  // (SharedFwht's first barrier publishes y)
}

using SplitKernel = void (*)(const float*, int64_t, DevCompressedKv, DevAttention, int64_t, float*);

// The key format's instance for value format VF (null: the key is not a fast format).
template <int kD, int VF>
SplitKernel SplitKernelForKey(int kf) {
  switch (kf) {
    case kQ2:
      return CompressedSplitKernel<kD, kQ2, VF>;
    case kQ3:
      return CompressedSplitKernel<kD, kQ3, VF>;
    case kQ4:
      return CompressedSplitKernel<kD, kQ4, VF>;
    case kQ8:
      return CompressedSplitKernel<kD, kQ8, VF>;
    default:
      return nullptr;
  }
}

template <int kD>
SplitKernel FastSplitKernel(const DevCompressedKv& kv) {
  switch (kv.vf.seg[0].format) {
    case kQ2:
      return SplitKernelForKey<kD, kQ2>(kv.kf.seg[0].format);
    case kQ3:
      return SplitKernelForKey<kD, kQ3>(kv.kf.seg[0].format);
    case kQ4:
      return SplitKernelForKey<kD, kQ4>(kv.kf.seg[0].format);
    default:
      return nullptr;
  }
}

// The split kernel for the cache's formats: a compiled-in decoder where both sides have one
// segment, groups of a multiple of 32 channels, q2/q3/q4/q8 keys and q2/q3/q4 values (every K·V·
// preset); CodedAt's run-time decoder otherwise (outlier splits, fractional widths, q1). Per-head
// registers are sized for 8 query heads a KV head for every model: an instance sized for 4 (168
// registers with spills, 3 blocks an SM) was measured slower on the H100 (K4V3, 32K positions:
// 273 against 197 µs a call).
template <int kD>
SplitKernel SplitKernelFor(const DevCompressedKv& kv) {
  const bool fast = kv.kf.num_segments == 1 && kv.vf.num_segments == 1 && kv.kf.group % 32 == 0 &&
                    kv.vf.group % 32 == 0;
  SplitKernel k = fast ? FastSplitKernel<kD>(kv) : nullptr;
  return k ? k : CompressedSplitKernel<kD, kAnyFormat, kAnyFormat>;
}

// The split plan when the split kernels take the shape (head_dim, group, QJL sketch that the
// generic kernel's shared sketch buffer would also hold); `piped`: the pipelined split kernel
// takes it, and the plan fills one wave of its blocks.
SplitPlan CompressedPlan(int64_t n, int64_t pos0, const DevCompressedKv& kv, const DevAttention& p,
                         bool* piped) {
  *piped = false;
  if (kv.qjl_m > 1024) return {};
  if (const int per_sm = PipedSplitBlocksPerSm(kv, p); per_sm > 0) {
    *piped = true;
    return PipedPlan(n, pos0, p, per_sm);
  }
  return PlanSplits(n, pos0, p);
}

}  // namespace

int64_t CompressedAttentionScratchFloats(int64_t n, int64_t pos0, const DevCompressedKv& kv,
                                         const DevAttention& p) {
  bool piped = false;
  const SplitPlan plan = CompressedPlan(n, pos0, kv, p, &piped);
  if (plan.splits == 0) return 0;
  return n * p.num_heads * (p.head_dim + kv.qjl_m) +
         n * p.num_heads * plan.splits * (p.head_dim + 2);
}

void LaunchCompressedAttention(const float* q, int64_t n, int64_t pos0, const DevCompressedKv& kv,
                               const DevAttention& p, float* scratch, float* out, cudaStream_t s) {
  bool piped = false;
  const SplitPlan plan = CompressedPlan(n, pos0, kv, p, &piped);
  if (plan.splits == 0 || !scratch) {
    const dim3 grid(unsigned(n), unsigned(p.num_heads));
    TQ_LAUNCH(CompressedAttentionKernel, grid, kAttnWarps * 32, s, q, pos0, kv, p, out);
    return;
  }
  float* qp = scratch;
  float* part = scratch + n * p.num_heads * (p.head_dim + kv.qjl_m);
  TQ_LAUNCH(CompressedQueryKernel, dim3(unsigned(n), unsigned(p.num_heads)), 128, s, q, kv, p, qp);
  if (piped) {
    LaunchPipedSplit(qp, n, pos0, kv, p, plan.splits, plan.chunk, part, s);
  } else {
    const dim3 grid(unsigned(n), unsigned(p.num_kv_heads), unsigned(plan.splits));
    auto* kernel = p.head_dim == 64    ? SplitKernelFor<64>(kv)
                   : p.head_dim == 128 ? SplitKernelFor<128>(kv)
                                       : SplitKernelFor<256>(kv);
    TQ_LAUNCH(kernel, grid, kAttnWarps * 32, s, qp, pos0, kv, p, plan.chunk, part);
  }
  TQ_LAUNCH(CompressedMergeKernel, unsigned(n * p.num_heads), unsigned(p.head_dim), s, part,
            plan.splits, kv, p, out);
}

}  // namespace tq::kernels::cuda
