// Row-wise and elementwise CUDA kernels: embeddings (dense and packed), Add, SiluMul, RmsNorm,
// RoPE, KV store, MoE routing, gather / ordered scatter-add, argmax. Semantics as in ops.h and
// backend.h; each kernel's comment gives its launch shape.
#include <algorithm>
#include <cfloat>
#include <initializer_list>

#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ void RaiseError(DeviceError* err, int code, int value) {
  if (atomicCAS(&err->code, kErrNone, code) == kErrNone) err->value = value;
}

// One thread per output element of out [n, dim].
__global__ void EmbedRowsKernel(const void* table, Elem elem, int64_t vocab, int64_t dim,
                                const int32_t* ids, int64_t n, float* out, DeviceError* err) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t r = i / dim, c = i - r * dim;
  const int32_t id = ids[r];
  if (id < 0 || id >= vocab) {
    if (c == 0) RaiseError(err, kErrTokenId, id);
    out[i] = 0.0f;
    return;
  }
  out[i] = LoadElem(table, elem, int64_t(id) * dim + c);
}

__global__ void PackedEmbedRowsKernel(DevPacked w, const int32_t* ids, int64_t n, float* out,
                                      DeviceError* err) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * w.cols) return;
  const int64_t r = i / w.cols, c = i - r * w.cols;
  const int32_t id = ids[r];
  if (id < 0 || id >= w.rows) {
    if (c == 0) RaiseError(err, kErrPackedTokenId, id);
    out[i] = 0.0f;
    return;
  }
  out[i] = PackedAt(w, w.codebook, id, c);
}

__global__ void AddKernel(float* y, const float* x, int64_t n) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void SiluMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = SiluMulOf(gate[i], up[i]);
}

// One CUDA block per row; the sum of squares in fp32 over a block reduction.
__global__ void RmsNormKernel(const float* x, int64_t dim, const float* weight, float eps,
                              float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const float* xr = x + int64_t(blockIdx.x) * dim;
  float* yr = out + int64_t(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  __shared__ float part[kThreads / 32];
  ss = WarpSum(ss);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    v = WarpSum(v);
    if (threadIdx.x == 0) part[0] = v;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(part[0] / float(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * inv * weight[i];
}

// Rows of float4s (dim % 4 == 0, every pointer 16-byte aligned, dim <= 4 · kNormVec · 1024):
// one CUDA block per row, each thread loads its kNormVec float4s at once (all in flight before
// the first use: a 4096-wide row is one load per thread, not 16 dependent ones) and keeps them
// in registers for the second pass. out may alias x (each element is read and written by the
// same thread).
constexpr int kNormVec = 4;

// kAdd: x += add first (the residual add before a norm), the sum written back to x and normed.
template <bool kAdd>
__global__ void __launch_bounds__(1024)
    RmsNormVecKernel(const float* x, const float* add, float* x_out, int64_t dim,
                     const float* weight, float eps, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t n4 = dim / 4;
  const float4* xr = reinterpret_cast<const float4*>(x + int64_t(blockIdx.x) * dim);
  float4* yr = reinterpret_cast<float4*>(out + int64_t(blockIdx.x) * dim);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  float4 v[kNormVec], g[kNormVec];
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < kNormVec; ++e) {  // the weights' loads too go out before the reduction
    const int64_t i = threadIdx.x + int64_t(e) * blockDim.x;
    if (i < n4) g[e] = __ldg(w4 + i);
  }
#pragma unroll
  for (int e = 0; e < kNormVec; ++e) {
    const int64_t i = threadIdx.x + int64_t(e) * blockDim.x;
    v[e] = i < n4 ? xr[i] : float4{0.0f, 0.0f, 0.0f, 0.0f};
    if (kAdd && i < n4) {
      const float4 a = reinterpret_cast<const float4*>(add + int64_t(blockIdx.x) * dim)[i];
      v[e] = float4{v[e].x + a.x, v[e].y + a.y, v[e].z + a.z, v[e].w + a.w};
      reinterpret_cast<float4*>(x_out + int64_t(blockIdx.x) * dim)[i] = v[e];
    }
    ss += v[e].x * v[e].x + v[e].y * v[e].y + v[e].z * v[e].z + v[e].w * v[e].w;
  }
  __shared__ float part[32];
  ss = WarpSum(ss);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    t = WarpSum(t);
    if (threadIdx.x == 0) part[0] = t;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(part[0] / float(dim) + eps);
#pragma unroll
  for (int e = 0; e < kNormVec; ++e) {
    const int64_t i = threadIdx.x + int64_t(e) * blockDim.x;
    if (i >= n4) break;
    yr[i] = float4{v[e].x * inv * g[e].x, v[e].y * inv * g[e].y, v[e].z * inv * g[e].z,
                   v[e].w * inv * g[e].w};
  }
}

// One thread per (row, head, pair i < head_dim / 2). cos/sin in double of the fp32 angle (as
// the reference), so long positions keep their accuracy.
__global__ void RopeKernel(float* x, int64_t rows, int64_t heads, int64_t head_dim,
                           const int64_t* positions, const float* inv_freq, float attn_factor) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t half = head_dim / 2;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * heads * half) return;
  const int64_t p = i % half, rh = i / half, r = rh / heads;
  const float angle = float(positions[r]) * inv_freq[p];
  double sd, cd;
  sincos(double(angle), &sd, &cd);
  const float c = float(cd) * attn_factor, s = float(sd) * attn_factor;
  float* v = x + rh * head_dim;
  const float a = v[p], b = v[p + half];
  v[p] = a * c - b * s;
  v[p + half] = b * c + a * s;
}

// One thread per source element of src [n, heads, head_dim]; blockIdx.y = 1: src2 into dst2
// (a layer's values beside its keys, one launch).
__global__ void KvStoreKernel(const float* src, const float* src2, int64_t n, int64_t heads,
                              int64_t head_dim, void* dst, void* dst2, Elem elem,
                              int64_t head_stride, int64_t slot0) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * heads * head_dim) return;
  if (blockIdx.y == 1) src = src2, dst = dst2;  // the pair's second source (values)
  const int64_t d = i % head_dim, h = (i / head_dim) % heads, t = i / (head_dim * heads);
  const int64_t o = h * head_stride + (slot0 + t) * head_dim + d;
  const float v = src[i];
  if (elem == Elem::kF32) {
    static_cast<float*>(dst)[o] = v;
  } else if (elem == Elem::kF16) {
    static_cast<__half*>(dst)[o] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(dst)[o] = __float2bfloat16_rn(v);
  }
}

// One thread per row of logits [n, experts]: fp32 softmax, then top_k passes each picking the
// best (probability, lower id) strictly after the previous pick in that order.
// One warp a row (p [experts] in shared memory): the softmax once — the max
// by a warp reduction (order-free), the exponentials per lane, their sum by lane 0 in expert order
// (as one thread summed before) — then top_k rounds of a warp argmax: larger p first, ties to the
// smaller expert id, the picked one removed. The same p values, picks and weights as one thread
// walking every expert top_k times (55 µs for 64 experts top-6 on the H200; now a few).
__global__ void MoeRouteKernel(const float* logits, int64_t experts, int64_t top_k,
                               bool renormalize, int32_t* chosen, float* weight) {
  GridLaunchDependents();
  float* p = DynamicShared();  // [experts]
  const int64_t r = blockIdx.x;
  const int lane = int(threadIdx.x);
  const float* x = logits + r * experts;
  float mx = -INFINITY;
  for (int64_t e = lane; e < experts; e += 32) mx = fmaxf(mx, x[e]);
  mx = WarpMax(mx);
  for (int64_t e = lane; e < experts; e += 32) p[e] = expf(x[e] - mx);
  __syncthreads();  // the block is this one warp
  float sum = 0.0f;
  if (lane == 0)
    for (int64_t e = 0; e < experts; ++e) sum += p[e];
  sum = __shfl_sync(0xffffffffu, sum, 0);
  for (int64_t e = lane; e < experts; e += 32) p[e] = p[e] / sum;
  __syncthreads();
  float picked = 0.0f;
  for (int64_t k = 0; k < top_k; ++k) {
    float best_p = -1.0f;  // every p >= 0; removed ones are -2
    int best_e = -1;
    for (int64_t e = lane; e < experts; e += 32)  // ascending e: strict > keeps the first of ties
      if (p[e] > best_p || best_e < 0) best_p = p[e], best_e = int(e);
    for (int o = 16; o > 0; o >>= 1) {  // ids travel as floats (exact below 2^24)
      const float op = __shfl_xor_sync(0xffffffffu, best_p, o);
      const int oe = int(__shfl_xor_sync(0xffffffffu, float(best_e), o));
      const bool take = oe >= 0 && (best_e < 0 || op > best_p || (op == best_p && oe < best_e));
      if (take) best_p = op, best_e = oe;
    }
    if (lane == 0) {
      chosen[r * top_k + k] = int32_t(best_e);
      weight[r * top_k + k] = best_p;
    }
    picked += best_p;
    __syncthreads();
    if (lane == 0) p[best_e] = -2.0f;
    __syncthreads();
  }
  if (renormalize && picked > 0.0f && lane == 0)
    for (int64_t k = 0; k < top_k; ++k) weight[r * top_k + k] /= picked;
}

__global__ void GatherRowsKernel(const float* src, const int32_t* rows, int64_t count, int64_t dim,
                                 float* dst) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * dim) return;
  const int64_t r = i / dim, c = i - r * dim;
  dst[i] = src[int64_t(rows[r]) * dim + c];
}

// One thread per column: rows are accumulated in order of i (rows may repeat), the CPU's order.
__global__ void ScatterAddRowsKernel(const float* src, const int32_t* rows, const float* weight,
                                     int64_t count, int64_t dim, float* dst) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (int64_t i = 0; i < count; ++i)
    dst[int64_t(rows[i]) * dim + c] += weight[i] * src[i * dim + c];
}

// One CUDA block per row: (value, index) max, the lower index on ties.
__global__ void ArgmaxKernel(const float* x, int64_t n, int32_t* out) {
  const float* xr = x + int64_t(blockIdx.x) * n;
  float best = -INFINITY;
  int64_t idx = -1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i];
    if (idx < 0 || v > best) best = v, idx = i;
  }
  __shared__ float sv[kThreads];
  __shared__ int64_t si[kThreads];
  sv[threadIdx.x] = best;
  si[threadIdx.x] = idx;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) {
      const float v = sv[threadIdx.x + o];
      const int64_t j = si[threadIdx.x + o];
      const int64_t mine = si[threadIdx.x];
      if (j >= 0 && (mine < 0 || v > sv[threadIdx.x] || (v == sv[threadIdx.x] && j < mine)))
        sv[threadIdx.x] = v, si[threadIdx.x] = j;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = int32_t(si[0] < 0 ? 0 : si[0]);
}

}  // namespace

void LaunchEmbedRows(const void* table, Elem elem, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t n, float* out, DeviceError* err, cudaStream_t s) {
  TQ_LAUNCH(EmbedRowsKernel, Blocks(n * dim, kThreads), kThreads, s, table, elem, vocab, dim, ids,
            n, out, err);
}

void LaunchPackedEmbedRows(const DevPacked& w, const int32_t* ids, int64_t n, float* out,
                           DeviceError* err, cudaStream_t s) {
  TQ_LAUNCH(PackedEmbedRowsKernel, Blocks(n * w.cols, kThreads), kThreads, s, w, ids, n, out, err);
}

void LaunchAdd(float* y, const float* x, int64_t n, cudaStream_t s) {
  TQ_LAUNCH(AddKernel, Blocks(n, kThreads), kThreads, s, y, x, n);
}

void LaunchSiluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s) {
  TQ_LAUNCH(SiluMulKernel, Blocks(n, kThreads), kThreads, s, gate, up, n, out);
}

namespace {

// Rows of dim % 4 == 0 (at most kNormVec float4s a thread of 1024) and 16-byte aligned pointers
// take the vector kernel.
bool NormVecFits(int64_t dim, std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16) return false;
  return dim % 4 == 0 && dim / 4 <= kNormVec * 1024;
}
// Threads: a multiple of 32 giving each at most kNormVec float4s.
unsigned NormVecThreads(int64_t dim) {
  return unsigned(std::min<int64_t>(1024, ((dim / 4 + kNormVec - 1) / kNormVec + 31) / 32 * 32));
}

}  // namespace

void LaunchRmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                   float* out, cudaStream_t s) {
  if (NormVecFits(dim, {x, weight, out})) {
    TQ_LAUNCH(RmsNormVecKernel<false>, unsigned(rows), NormVecThreads(dim), s, x, nullptr, nullptr,
              dim, weight, eps, out);
    return;
  }
  TQ_LAUNCH(RmsNormKernel, unsigned(rows), kThreads, s, x, dim, weight, eps, out);
}

void LaunchAddRmsNorm(float* x, const float* y, int64_t rows, int64_t dim, const float* weight,
                      float eps, float* out, cudaStream_t s) {
  if (NormVecFits(dim, {x, y, weight, out})) {
    TQ_LAUNCH(RmsNormVecKernel<true>, unsigned(rows), NormVecThreads(dim), s, x, y, x, dim, weight,
              eps, out);
    return;
  }
  LaunchAdd(x, y, rows * dim, s);
  LaunchRmsNorm(x, rows, dim, weight, eps, out, s);
}

void LaunchRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                const float* inv_freq, float attn_factor, cudaStream_t s) {
  const int64_t total = rows * heads * (head_dim / 2);
  TQ_LAUNCH(RopeKernel, Blocks(total, kThreads), kThreads, s, x, rows, heads, head_dim, positions,
            inv_freq, attn_factor);
}

void LaunchKvStore(const float* src, const float* src2, int64_t n, int64_t heads, int64_t head_dim,
                   void* dst, void* dst2, Elem elem, int64_t head_stride, int64_t slot0,
                   cudaStream_t s) {
  const dim3 grid(Blocks(n * heads * head_dim, kThreads), src2 ? 2 : 1);
  TQ_LAUNCH(KvStoreKernel, grid, kThreads, s, src, src2, n, heads, head_dim, dst, dst2, elem,
            head_stride, slot0);
}

void LaunchMoeRoute(const float* logits, int64_t n, int64_t experts, int64_t top_k,
                    bool renormalize, int32_t* chosen, float* weight, cudaStream_t s) {
  TQ_LAUNCH_SMEM(MoeRouteKernel, unsigned(n), 32, size_t(experts) * sizeof(float), s, logits,
                 experts, top_k, renormalize, chosen, weight);
}

void LaunchGatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim, float* dst,
                      cudaStream_t s) {
  TQ_LAUNCH(GatherRowsKernel, Blocks(count * dim, kThreads), kThreads, s, src, rows, count, dim,
            dst);
}

void LaunchScatterAddRows(const float* src, const int32_t* rows, const float* weight, int64_t count,
                          int64_t dim, float* dst, cudaStream_t s) {
  TQ_LAUNCH(ScatterAddRowsKernel, Blocks(dim, 128), 128, s, src, rows, weight, count, dim, dst);
}

void LaunchArgmax(const float* x, int64_t rows, int64_t n, int32_t* out, cudaStream_t s) {
  TQ_LAUNCH(ArgmaxKernel, unsigned(rows), kThreads, s, x, n, out);
}

}  // namespace tq::kernels::cuda
