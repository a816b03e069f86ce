// Causal attention for many query rows at once (prefill, n >= kPrefillMinRows), head_dim 64 or
// 128, in fp32 (the decode kernels' accuracy): one CUDA block of 256 threads per (tile of 64
// query rows, query head) walks the key positions in tiles of 64 with an online softmax, so each
// K/V tile is read once per 64 query rows (attention.cu's per-row kernels read every position
// once per row: 512 rows of an 8B-shaped prefill took ~3.5 ms a layer).
//
// Shared memory: Q [64][kD + 4] (scaled by the softmax scale), one K-or-V tile [64][kD + 4] (K
// first; after the scores are taken V replaces it) and P [64][64 + 4], fp32; ~84 KiB at kD 128,
// two blocks per SM. Thread (ty, tx) = (tid / 16, tid % 16) owns query rows 4·ty .. 4·ty + 3:
// the scores of key columns tx + 16·b (b < 4) and the outputs of channels 8·tx .. (kD = 128)
// or 4·tx .. (kD = 64). Row maxima and sums are reduced over the 16 threads of a row group by
// warp shuffles; a row whose positions in a tile are all masked keeps its state.
#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kPRows = 64, kPCols = 64, kPThreads = 256;

inline constexpr size_t PrefillSmemFloats(int d) {
  return size_t(2 * kPRows * (d + 4) + kPRows * (kPCols + 4));
}

template <Elem E, int kD>
__global__ void __launch_bounds__(kPThreads)
    PrefillAttentionKernel(const float* __restrict__ q, int64_t n, int64_t pos0, const void* k,
                           const void* v, int64_t head_stride, DevAttention p,
                           float* __restrict__ out) {
  constexpr int kS = kD + 4;       // row stride of Q and K/V in shared memory
  constexpr int kC = kD / 16;      // output channels per thread
  constexpr int kPS = kPCols + 4;  // row stride of P
  float* qs = DynamicShared();
  float* kv = qs + kPRows * kS;
  float* ps = kv + kPCols * kS;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int64_t i0 = int64_t(blockIdx.x) * kPRows, h = blockIdx.y;
  const int64_t kvh = h / (p.num_heads / p.num_kv_heads);
  const int64_t rows = n - i0 < kPRows ? n - i0 : kPRows;
  // Q tile, scaled; rows past n are zeros (their outputs are not written).
  for (int e = tid; e < kPRows * kD; e += kPThreads) {
    const int r = e / kD, j = e % kD;
    qs[r * kS + j] = r < rows ? q[((i0 + r) * p.num_heads + h) * kD + j] * p.scale : 0.0f;
  }
  float m[4], l[4], o[4][kC];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    m[a] = -INFINITY, l[a] = 0.0f;
#pragma unroll
    for (int c = 0; c < kC; ++c) o[a][c] = 0.0f;
  }
  // kv [c][j] = positions t0 + c of the cache `src` (K or V) for c < cols, zeros after.
  auto load_tile = [&](const void* src, int64_t t0, int64_t cols) {
    for (int e = tid; e < kPCols * kD; e += kPThreads) {
      const int c = e / kD, j = e % kD;
      kv[c * kS + j] = c < cols ? LoadElem<E>(src, kvh * head_stride + (t0 + c) * kD + j) : 0.0f;
    }
  };
  // Key positions of the tile's rows: [first of row 0, pos of the last row].
  const int64_t last = pos0 + i0 + rows - 1;
  const int64_t begin = p.window > 0 ? max(int64_t(0), pos0 + i0 - p.window + 1) : 0;
  for (int64_t t0 = begin; t0 <= last; t0 += kPCols) {
    const int64_t cols = last + 1 - t0 < kPCols ? last + 1 - t0 : kPCols;
    __syncthreads();  // the previous tile's V and P are consumed
    load_tile(k, t0, cols);
    __syncthreads();
    // Scores s[a][b] = q[4ty + a] · k[tx + 16b].
    float s[4][4] = {};
#pragma unroll 4
    for (int j = 0; j < kD; j += 4) {
      float4 qa[4], kb[4];
#pragma unroll
      for (int a = 0; a < 4; ++a)
        qa[a] = *reinterpret_cast<const float4*>(qs + (4 * ty + a) * kS + j);
#pragma unroll
      for (int b = 0; b < 4; ++b)
        kb[b] = *reinterpret_cast<const float4*>(kv + (tx + 16 * b) * kS + j);
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
          s[a][b] += qa[a].x * kb[b].x + qa[a].y * kb[b].y + qa[a].z * kb[b].z + qa[a].w * kb[b].w;
    }
    // Mask, online softmax over the 16 threads of each row, P to shared memory.
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int64_t pos = pos0 + i0 + 4 * ty + a;
      const int64_t first = p.window > 0 ? pos - p.window + 1 : 0;
      float mx = -INFINITY;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int64_t t = t0 + tx + 16 * b;
        if (tx + 16 * b >= cols || t > pos || t < first) s[a][b] = -INFINITY;
        mx = fmaxf(mx, s[a][b]);
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mn = fmaxf(m[a], mx);
      // All of the row's positions so far masked: nothing to add (mn = -inf).
      const float corr = mn == -INFINITY ? 1.0f : expf(m[a] - mn);
      float sum = 0.0f;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const float pr = s[a][b] == -INFINITY ? 0.0f : expf(s[a][b] - mn);
        ps[(4 * ty + a) * kPS + tx + 16 * b] = pr;
        sum += pr;
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[a] = l[a] * corr + sum;
      m[a] = mn;
#pragma unroll
      for (int c = 0; c < kC; ++c) o[a][c] *= corr;
    }
    __syncthreads();  // scores taken from K; P complete
    load_tile(v, t0, cols);
    __syncthreads();
    // o[a][c] += Σ_t P[4ty + a][t] · V[t][kC·tx + c].
    for (int t = 0; t < cols; t += 4) {
      float4 pa[4];
#pragma unroll
      for (int a = 0; a < 4; ++a)
        pa[a] = *reinterpret_cast<const float4*>(ps + (4 * ty + a) * kPS + t);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float vv[kC];
#pragma unroll
        for (int c = 0; c < kC; c += 4) {
          const float4 x = *reinterpret_cast<const float4*>(kv + (t + u) * kS + kC * tx + c);
          vv[c] = x.x, vv[c + 1] = x.y, vv[c + 2] = x.z, vv[c + 3] = x.w;
        }
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const float w = u == 0 ? pa[a].x : u == 1 ? pa[a].y : u == 2 ? pa[a].z : pa[a].w;
#pragma unroll
          for (int c = 0; c < kC; ++c) o[a][c] += w * vv[c];
        }
      }
    }
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int r = 4 * ty + a;
    if (r >= rows) continue;
    float* dst = out + ((i0 + r) * p.num_heads + h) * kD + kC * tx;
    const float inv = 1.0f / l[a];
#pragma unroll
    for (int c = 0; c < kC; ++c) dst[c] = o[a][c] * inv;
  }
}

template <Elem E, int kD>
void LaunchPrefill(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                   int64_t head_stride, const DevAttention& p, float* out, cudaStream_t s) {
  auto* kernel = PrefillAttentionKernel<E, kD>;
  const size_t smem = PrefillSmemFloats(kD) * sizeof(float);
  static const bool raised =  // once per instantiation
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) ==
      cudaSuccess;
  (void)raised;
  const dim3 grid(Blocks(n, kPRows), unsigned(p.num_heads));
  TQ_LAUNCH_SMEM(kernel, grid, kPThreads, smem, s, q, n, pos0, k, v, head_stride, p, out);
}

template <int kD>
void LaunchPrefillOf(Elem e, const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                     int64_t head_stride, const DevAttention& p, float* out, cudaStream_t s) {
  switch (e) {
    case Elem::kF32:
      return LaunchPrefill<Elem::kF32, kD>(q, n, pos0, k, v, head_stride, p, out, s);
    case Elem::kF16:
      return LaunchPrefill<Elem::kF16, kD>(q, n, pos0, k, v, head_stride, p, out, s);
    case Elem::kBF16:
      return LaunchPrefill<Elem::kBF16, kD>(q, n, pos0, k, v, head_stride, p, out, s);
  }
}

}  // namespace

bool PrefillAttention(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                      Elem elem, int64_t head_stride, const DevAttention& p, float* out,
                      cudaStream_t s) {
  if (n < kPrefillMinRows || n > (int64_t(1) << 30)) return false;
  if (p.head_dim == 128) {
    LaunchPrefillOf<128>(elem, q, n, pos0, k, v, head_stride, p, out, s);
    return true;
  }
  if (p.head_dim == 64) {
    LaunchPrefillOf<64>(elem, q, n, pos0, k, v, head_stride, p, out, s);
    return true;
  }
  return false;
}

}  // namespace tq::kernels::cuda
