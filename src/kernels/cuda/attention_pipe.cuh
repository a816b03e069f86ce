// What the pipelined split ("flash-decoding") kernels share: attention_piped.cu (plain caches)
// and attention_compressed_piped.cu (the TurboQuant cache). A block of 4 warps per (query row,
// KV head, split of the positions) copies tiles of its positions' keys and values into shared
// memory with cp.async, kPipeStages - 1 tiles ahead of the one it computes (the loads in flight
// are what hides the memory's latency: a warp-per-position kernel at 2-3 blocks an SM keeps too
// few), and each warp adds kT positions at a time to the online softmax of the group's query
// heads (TileUpdate). The running max is in log2 units (exp2f); what a split writes is in
// natural units (m, l, acc[kD]) as MergeSplits expects.
#pragma once

#include <map>
#include <mutex>
#include <utility>

#include "kernels/cuda/attention_common.cuh"

namespace tq::kernels::cuda {

inline constexpr int kPipeThreads = kAttnWarps * 32;
inline constexpr int kPipeStages = 4;  // tiles a block holds: one computed, the rest in flight
inline constexpr float kPipeLog2e = 1.4426950408889634f, kPipeLn2 = 0.6931471805599453f;

template <int kD>
inline constexpr int kPipeT = kD <= 128 ? 4 : 2;  // positions a warp adds at once

TQ_HOST_DEVICE constexpr int Log2(int n) { return n <= 1 ? 0 : 1 + Log2(n / 2); }

// One halving round of ReduceScatter and the ones after it (compile-time counts, so that v
// stays in registers).
template <int kHalf, int kO, int N>
__device__ __forceinline__ void Halve(float (&v)[N], int lane) {
  if constexpr (kHalf >= 1) {
    const bool upper = (lane & kO) != 0;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const float send = upper ? v[i] : v[i + kHalf];
      const float keep = upper ? v[i + kHalf] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kO);
    }
    Halve<kHalf / 2, kO / 2>(v, lane);
  }
}

// v[0..N) of every lane -> the sum over the warp of v[k] in lane l, k = l >> (5 - log2 N) (N a
// power of two <= 32): log2 N halving rounds (lanes with bit o keep the upper half of what is
// left and send the lower), then whole-warp sums over the remaining lane bits. N - 1 + 5 -
// log2 N shuffles where N warp sums take 5 N.
template <int N>
__device__ __forceinline__ float ReduceScatter(float (&v)[N], int lane) {
  Halve<N / 2, 16>(v, lane);
  float r = v[0];
#pragma unroll
  for (int o = 16 / N; o >= 1; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  return r;
}

// The positions [lo, hi) a split block (blockIdx: row i, KV head, split) attends to: row i is at
// pos0 + i and sees the window's positions (all with window 0), cut into splits of `chunk`.
struct SplitRange {
  int64_t i, kvh, split, lo, hi;
};
__device__ __forceinline__ SplitRange SplitOfBlock(int64_t pos0, const DevAttention& p,
                                                   int64_t chunk) {
  const int64_t i = blockIdx.x, split = blockIdx.z, pos = pos0 + i;
  const int64_t first = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t lo = first + split * chunk;
  return {i, int64_t(blockIdx.y), split, lo, min(pos + 1, lo + chunk)};
}

// A warp's online softmax for the group's heads g < G (of kG; lane holds channels lane + 32 e).
template <int kG, int kP>
struct GroupState {
  float qv[kG][kP], acc[kG][kP], m[kG], l[kG];
};

// The group's queries: heads g < G of q_g (rows kD floats apart), zero beyond.
template <int kG, int kP>
__device__ __forceinline__ void InitGroup(GroupState<kG, kP>& st, const float* qg, int G,
                                          int lane) {
#pragma unroll
  for (int g = 0; g < kG; ++g) {
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      st.qv[g][e] = g < G ? qg[g * kP * 32 + lane + 32 * e] : 0.0f;
      st.acc[g][e] = 0.0f;
    }
    st.m[g] = -INFINITY, st.l[g] = 0.0f;
  }
}

// Adds kT positions (keys kk, values vv: this lane's channels; the first `valid` of them) to the
// state: the kT · kG partial dot products summed by one ReduceScatter (pair k = g · kT + u, head
// g, position u, ends in lanes k << kShift), each lane exponentiates its pair, and the
// probabilities are broadcast back for the values.
template <int kT, int kG, int kP>
__device__ __forceinline__ void TileUpdate(GroupState<kG, kP>& st, const float (&kk)[kT][kP],
                                           const float (&vv)[kT][kP], int valid, int G,
                                           float scale2, int lane) {
  constexpr int N = kT * kG;
  constexpr int kShift = 5 - Log2(N);
  static_assert(N <= 32 && (N & (N - 1)) == 0, "kT · kG: a power of two <= 32");
  float part[N];
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int u = 0; u < kT; ++u) {
      float d = 0.0f;
#pragma unroll
      for (int e = 0; e < kP; ++e) d += st.qv[g][e] * kk[u][e];
      part[g * kT + u] = d;
    }
  const float dot = ReduceScatter<N>(part, lane);
  const int k = lane >> kShift, g = k / kT, u = k % kT;
  const float sc = u < valid && g < G ? dot * scale2 : -INFINITY;
  float mx = sc;  // the tile's max for head g: over the lanes of the same g
#pragma unroll
  for (int o = 1 << kShift; o < (kT << kShift); o <<= 1)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float mg = st.m[0];
#pragma unroll
  for (int h = 1; h < kG; ++h) mg = h == g ? st.m[h] : mg;
  const float mnew = fmaxf(mg, mx);
  const float pr = sc == -INFINITY ? 0.0f : exp2f(sc - mnew);
#pragma unroll
  for (int h = 0; h < kG; ++h) {
    if (h >= G) break;
    const float mn = __shfl_sync(0xffffffffu, mnew, (h * kT) << kShift);  // finite: u = 0 valid
    const float corr = exp2f(st.m[h] - mn);
    float pu[kT], sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kT; ++w) {
      pu[w] = __shfl_sync(0xffffffffu, pr, (h * kT + w) << kShift);
      sum += pu[w];
    }
    st.l[h] = st.l[h] * corr + sum;
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      float a = st.acc[h][e] * corr;
#pragma unroll
      for (int w = 0; w < kT; ++w) a += pu[w] * vv[w][e];
      st.acc[h][e] = a;
    }
    st.m[h] = mn;
  }
}

// `bytes` from global src to shared dst in cp.async copies of w bytes (all threads of the block).
__device__ __forceinline__ void CopyRows(uint8_t* dst, const uint8_t* src, int bytes, int w) {
  for (int off = int(threadIdx.x) * w; off < bytes; off += kPipeThreads * w)
    CpAsync(dst + off, src + off, w);
}

// Merges the block's warps (a warp with no position has m = -inf, l = 0) for heads g < G of the
// group starting at head h0 of row i: the split's state to part [n, heads, splits, 2 + kD], or
// with splits == 1 and `out` the normalized output [n, heads, kD]. accs: shared memory of
// kAttnWarps · kG · kD floats no thread reads any more (the stages). All threads.
template <int kD, int kG, int kP>
__device__ __forceinline__ void FinishSplit(const GroupState<kG, kP>& st, int G, float* accs,
                                            int64_t i, int64_t h0, int64_t heads, int split,
                                            int splits, float* part, float* out) {
  __shared__ float ms[kAttnWarps][kG], ls[kAttnWarps][kG];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g >= G) break;
    if (lane == 0) ms[warp][g] = st.m[g] * kPipeLn2, ls[warp][g] = st.l[g];
#pragma unroll
    for (int e = 0; e < kP; ++e) accs[(warp * kG + g) * kD + lane + 32 * e] = st.acc[g][e];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * kD; idx += kPipeThreads) {
    const int g = idx / kD, j = idx % kD;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, ms[w][g]);
    float sum = 0.0f, av = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) {
      const float f = ms[w][g] == -INFINITY ? 0.0f : expf(ms[w][g] - mx);
      sum += ls[w][g] * f;
      av += accs[(w * kG + g) * kD + j] * f;
    }
    const int64_t h = h0 + g;
    if (out) {
      out[(i * heads + h) * kD + j] = av / sum;
    } else {
      float* ps = part + ((i * heads + h) * splits + split) * (kD + 2);
      ps[2 + j] = av;
      if (j == 0) ps[0] = mx, ps[1] = sum;
    }
  }
}

// Blocks an SM of `kernel` (kPipeThreads threads) with `smem` bytes of dynamic shared memory
// (its limit raised once), 0 when it cannot run; remembered per (kernel, smem).
template <typename K>
int PipeOccupancy(K* kernel, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<const void*, size_t>, int> known;
  std::lock_guard lock(mu);
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), smem);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int blocks = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) !=
          cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kPipeThreads, smem) !=
          cudaSuccess)
    blocks = 0;
  cudaGetLastError();
  known[key] = blocks;
  return blocks;
}

// The split plan for a pipelined kernel running `per_sm` blocks an SM: one wave on this device.
inline SplitPlan PipedPlan(int64_t n, int64_t pos0, const DevAttention& p, int per_sm) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    sms = 132;
  cudaGetLastError();
  return PlanSplits(n, pos0, p, int64_t(per_sm) * sms);
}

// --- attention_piped.cu: plain caches (head_dim 64/128/256, at most 8 query heads a KV head) ---
// Blocks an SM the plain pipelined kernel runs for elem and p's shape (0: not eligible, or
// TURBOQUANT_CUDA_KV_SPLIT=warp asks for attention.cu's warp-split kernel).
int PlainPipedBlocksPerSm(Elem elem, const DevAttention& p);
// part [n, heads, splits, 2 + d] (splits > 1) or out (splits == 1) for a plan of `splits` of
// `chunk` positions; false (nothing launched) when the kernel does not take k and v (not 16-byte
// aligned).
bool LaunchPlainPipedSplit(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                           Elem elem, int64_t head_stride, const DevAttention& p, int splits,
                           int64_t chunk, float* part, float* out, cudaStream_t s);

}  // namespace tq::kernels::cuda
