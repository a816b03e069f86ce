// Operands of the tensor-core GEMM (many-token products, n > 8): cuBLAS (blas.cc) multiplies
// bf16 operands with fp32 accumulation, so the fp32 activations and the packed weights are first
// written out as bf16 here.
//   SplitBf16: x -> hi = bf16(x) and, for fp32-grade activations, lo = bf16(x - hi) (a second
//              GEMM over lo adds the ~8 mantissa bits the first rounding dropped);
//   DequantBf16: a packed row range -> bf16 rows [count, cols] (scale · codebook[code] or
//              min + scale · code, rounded as PackedAt rounds it, then to bf16), so that the
//              GEMM reads the weights as a dense bf16 matrix (the caller sizes the row chunk);
//   FillRows:  y [n, out] = bias in every row (the GEMM then accumulates with beta = 1).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/packed_unit.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kOperandThreads = 256;

// One thread per 4 elements.
__global__ void SplitBf16Kernel(const float* __restrict__ x, int64_t count,
                                uint16_t* __restrict__ hi, uint16_t* __restrict__ lo) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i >= count) return;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (i + e >= count) break;
    const float v = x[i + e];
    const uint16_t h = Bf16Bits(v);
    hi[i + e] = h;
    if (lo) lo[i + e] = Bf16Bits(v - Bf16(h));
  }
}

// The codebook into shared memory (codebook rows only); every thread of the block calls it.
__device__ __forceinline__ void LoadBook(const DevPacked& w, float* book) {
  if (w.affine) return;
  for (int i = threadIdx.x; i < w.levels; i += blockDim.x) book[i] = w.codebook[i];
  __syncthreads();
}

// Unit-layout rows (F = kQ2..kQ8): one thread per 32-code unit, 64 bytes of bf16 written as four
// 16-byte stores (out rows are cols · 2 bytes, a multiple of 64).
template <int F>
__global__ void __launch_bounds__(kOperandThreads)
    DequantUnitsKernel(DevPacked w, int64_t r0, int64_t count, uint16_t* __restrict__ out) {
  __shared__ float book[256];
  LoadBook(w, book);
  const int64_t units = w.cols / 32;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * units) return;
  const int64_t rr = i / units, u = i - rr * units, r = r0 + rr;
  const Unit<F> q = LoadUnit<F>(w.codes + r * w.row_bytes + u * kUnitBytes<F>);
  const int64_t groups = w.cols / w.group_size;
  uint32_t words[16];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t g = r * groups + (u * 32 + 16 * half) / w.group_size;
    const float scale = PackedScale(w, g);
    const float mn = w.affine ? F16(__ldg(w.mins + g)) : 0.0f;
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = UnitCode<F>(q, 16 * half + j + e);
        v[e] = w.affine ? __fadd_rn(mn, __fmul_rn(scale, float(c))) : scale * book[c];
      }
      words[(16 * half + j) / 2] = uint32_t(Bf16Bits(v[0])) | uint32_t(Bf16Bits(v[1])) << 16;
    }
  }
  uint4* dst = reinterpret_cast<uint4*>(out + rr * w.cols + u * 32);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    dst[k] = uint4{words[4 * k], words[4 * k + 1], words[4 * k + 2], words[4 * k + 3]};
}

// Any other layout (q1, ternary, odd widths): one thread per element through PackedAt.
__global__ void __launch_bounds__(kOperandThreads)
    DequantElemsKernel(DevPacked w, int64_t r0, int64_t count, uint16_t* __restrict__ out) {
  __shared__ float book[256];
  LoadBook(w, book);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * w.cols) return;
  const int64_t rr = i / w.cols, c = i - rr * w.cols;
  out[i] = Bf16Bits(PackedAt(w, book, r0 + rr, c));
}

__global__ void FillRowsKernel(const float* __restrict__ bias, int64_t n, int64_t out,
                               float* __restrict__ y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n * out) y[i] = bias[i % out];
}

// Threads of the unit kernel's row range need 64-byte aligned bf16 rows: cols % 32 == 0.
bool UnitDequant(const DevPacked& w, const uint16_t* out) {
  return UnitLayout(w) && reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

}  // namespace

void LaunchSplitBf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t s) {
  if (count <= 0) return;
  TQ_LAUNCH(SplitBf16Kernel, Blocks((count + 3) / 4, kOperandThreads), kOperandThreads, s, x, count,
            hi, lo);
}

void LaunchDequantBf16(const DevPacked& w, int64_t r0, int64_t count, uint16_t* out,
                       cudaStream_t s) {
  if (count <= 0 || w.cols <= 0) return;
  if (!UnitDequant(w, out)) {
    TQ_LAUNCH(DequantElemsKernel, Blocks(count * w.cols, kOperandThreads), kOperandThreads, s, w,
              r0, count, out);
    return;
  }
  const unsigned grid = Blocks(count * (w.cols / 32), kOperandThreads);
  switch (w.format) {
    case kQ2:
      TQ_LAUNCH(DequantUnitsKernel<kQ2>, grid, kOperandThreads, s, w, r0, count, out);
      break;
    case kQ3:
      TQ_LAUNCH(DequantUnitsKernel<kQ3>, grid, kOperandThreads, s, w, r0, count, out);
      break;
    case kQ4:
      TQ_LAUNCH(DequantUnitsKernel<kQ4>, grid, kOperandThreads, s, w, r0, count, out);
      break;
    default:
      TQ_LAUNCH(DequantUnitsKernel<kQ8>, grid, kOperandThreads, s, w, r0, count, out);
      break;
  }
}

void LaunchFillRows(const float* bias, int64_t n, int64_t out, float* y, cudaStream_t s) {
  if (n <= 0 || out <= 0) return;
  TQ_LAUNCH(FillRowsKernel, Blocks(n * out, kOperandThreads), kOperandThreads, s, bias, n, out, y);
}

}  // namespace tq::kernels::cuda
