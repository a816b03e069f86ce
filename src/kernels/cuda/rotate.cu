// Blockwise randomized Hadamard rotation of rows (quant/hadamard.h): R x = H_b diag(s) x / √b per
// block of b channels. One CUDA block per (row, segment): a segment (a multiple of b, at most
// 4096 channels = 16 KiB of shared memory) is read whole before anything is written, so out may
// alias x. Two kernels: RotateVecKernel (segments of a multiple of 128 channels, aligned rows:
// every model's) and the generic RotateKernel. With `up` (not null) each reads silu(x) · up
// instead of x (SiluMulRotate: the SwiGLU product and the down projection's input rotation in
// one pass).
#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kRotateThreads = 256;
constexpr int64_t kMaxSegment = 4096;

constexpr int kMaxSmallHadamard = 28;

// Element i of the input: x[i], or silu(x[i]) · up[i].
__device__ __forceinline__ float InputAt(const float* x, const float* up, int64_t i) {
  return up ? SiluMulOf(x[i], up[i]) : x[i];
}

__global__ void RotateKernel(DevRotation r, const float* x, const float* up, int64_t seg,
                             float scale, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float buf[kMaxSegment];
  const int64_t base = int64_t(blockIdx.x) * r.dim + int64_t(blockIdx.y) * seg;
  const int64_t c0 = int64_t(blockIdx.y) * seg;
  for (int64_t i = threadIdx.x; i < seg; i += blockDim.x)
    buf[i] = InputAt(x, up, base + i) * float(r.signs[c0 + i]);
  const int p = int(r.block / r.m);  // the power-of-two factor of the block
  SharedFwht(buf, int(seg), p);
  if (r.m > 1) {
    // H_b = H_m ⊗ H_p (quant/hadamard_blocks.h): each block viewed as [m][p] had every row
    // transformed above; now every column (stride p) is multiplied by H_m, one column a thread.
    const int m = int(r.m);
    for (int col = threadIdx.x; col < int(seg) / m; col += blockDim.x) {
      float* c = buf + (col / p) * int(r.block) + col % p;
      float v[kMaxSmallHadamard];
      for (int l = 0; l < m; ++l) v[l] = c[l * p];
      for (int j = 0; j < m; ++j) {
        float acc = 0.0f;
        for (int l = 0; l < m; ++l) acc += float(r.small[j * m + l]) * v[l];
        c[j * p] = acc;
      }
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < seg; i += blockDim.x) out[base + i] = buf[i] * scale;
}

// The same for a segment of a multiple of 128 channels with x and out 16-byte aligned: seg / 4
// threads (at most 1024), thread t holding channels 4t..4t+3 in registers. The butterfly stages
// commute (one per bit of the channel index), so they run where the pair lives: h = 1, 2 inside
// the thread, h = 4..64 across the lanes of the warp (__shfl_xor, lane ^ h / 4), h >= 128
// through shared memory (one float4 store and one partner load per stage). One read of x and one
// write of out per element, against the generic kernel's 12 barriered passes over shared memory.
__global__ void __launch_bounds__(1024)
    RotateVecKernel(DevRotation r, const float* x, const float* up, int64_t seg, float scale,
                    float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float4 buf[kMaxSegment / 4];
  const int64_t c0 = int64_t(blockIdx.y) * seg + 4 * int64_t(threadIdx.x);
  const int64_t base = int64_t(blockIdx.x) * r.dim + c0;
  const int b = int(r.block);
  float4 in = *reinterpret_cast<const float4*>(x + base);
  if (up) {
    const float4 u = *reinterpret_cast<const float4*>(up + base);
    in = float4{SiluMulOf(in.x, u.x), SiluMulOf(in.y, u.y), SiluMulOf(in.z, u.z),
                SiluMulOf(in.w, u.w)};
  }
  float v[4] = {in.x * float(r.signs[c0]), in.y * float(r.signs[c0 + 1]),
                in.z * float(r.signs[c0 + 2]), in.w * float(r.signs[c0 + 3])};
  if (b > 1) {
    const float a0 = v[0] + v[1], a1 = v[0] - v[1], a2 = v[2] + v[3], a3 = v[2] - v[3];
    v[0] = a0, v[1] = a1, v[2] = a2, v[3] = a3;
  }
  if (b > 2) {
    const float a0 = v[0] + v[2], a1 = v[1] + v[3], a2 = v[0] - v[2], a3 = v[1] - v[3];
    v[0] = a0, v[1] = a1, v[2] = a2, v[3] = a3;
  }
  const int lane = threadIdx.x & 31;
  for (int m = 1; m < 32 && 4 * m < b; m <<= 1) {
    const bool high = (lane & m) != 0;  // holds x[i + h] of each pair
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float other = __shfl_xor_sync(0xffffffffu, v[e], m);
      v[e] = high ? other - v[e] : v[e] + other;
    }
  }
  for (int h4 = 32; 4 * h4 < b; h4 <<= 1) {  // partner float4: index ^ h / 4
    buf[threadIdx.x] = float4{v[0], v[1], v[2], v[3]};
    __syncthreads();
    const float4 o = buf[threadIdx.x ^ unsigned(h4)];
    __syncthreads();
    const bool high = (threadIdx.x & unsigned(h4)) != 0;
    v[0] = high ? o.x - v[0] : v[0] + o.x;
    v[1] = high ? o.y - v[1] : v[1] + o.y;
    v[2] = high ? o.z - v[2] : v[2] + o.z;
    v[3] = high ? o.w - v[3] : v[3] + o.w;
  }
  *reinterpret_cast<float4*>(out + base) =
      float4{v[0] * scale, v[1] * scale, v[2] * scale, v[3] * scale};
}

}  // namespace

void LaunchRotate(const DevRotation& r, const float* x, int64_t rows, float* out, cudaStream_t s,
                  const float* up) {
  // The largest multiple of the block (times a power of two) that divides dim and fits.
  int64_t seg = r.block;
  while (seg * 2 <= kMaxSegment && r.dim % (seg * 2) == 0) seg *= 2;
  const float scale = float(1.0 / sqrt(double(r.block)));
  const dim3 grid(unsigned(rows), unsigned(r.dim / seg));
  const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (r.m == 1 && seg % 128 == 0 && a16(x) && a16(out) && (!up || a16(up))) {
    TQ_LAUNCH(RotateVecKernel, grid, unsigned(seg / 4), s, r, x, up, seg, scale, out);
    return;
  }
  TQ_LAUNCH(RotateKernel, grid, kRotateThreads, s, r, x, up, seg, scale, out);
}

}  // namespace tq::kernels::cuda
