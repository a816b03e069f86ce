// Blockwise randomized Hadamard rotation of rows (quant/hadamard.h): R x = H_b diag(s) x / √b per
// block of b channels. One CUDA block per (row, segment): a segment (a multiple of b, at most
// 4096 channels = 16 KiB of shared memory) is read whole before anything is written, so out may
// alias x.
#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kRotateThreads = 256;
constexpr int64_t kMaxSegment = 4096;

__global__ void RotateKernel(DevRotation r, const float* x, int64_t seg, float scale, float* out) {
  __shared__ float buf[kMaxSegment];
  const int64_t base = int64_t(blockIdx.x) * r.dim + int64_t(blockIdx.y) * seg;
  const int64_t c0 = int64_t(blockIdx.y) * seg;
  for (int64_t i = threadIdx.x; i < seg; i += blockDim.x)
    buf[i] = x[base + i] * float(r.signs[c0 + i]);
  SharedFwht(buf, int(seg), int(r.block));
  for (int64_t i = threadIdx.x; i < seg; i += blockDim.x) out[base + i] = buf[i] * scale;
}

}  // namespace

void LaunchRotate(const DevRotation& r, const float* x, int64_t rows, float* out, cudaStream_t s) {
  // The largest multiple of the block (times a power of two) that divides dim and fits.
  int64_t seg = r.block;
  while (seg * 2 <= kMaxSegment && r.dim % (seg * 2) == 0) seg *= 2;
  const float scale = float(1.0 / sqrt(double(r.block)));
  const dim3 grid(unsigned(rows), unsigned(r.dim / seg));
  TQ_LAUNCH(RotateKernel, grid, kRotateThreads, s, r, x, seg, scale, out);
}

}  // namespace tq::kernels::cuda
