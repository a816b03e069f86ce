// Dense and packed matrix products y [n, out] = x [n, in] · Wᵀ (+ bias), fp32 activations and
// accumulation, W dense (F32/F16/BF16) or packed (codes + group scales + codebook, decoded on
// the fly: the weights stay packed in device memory).
//   n <= 8  matvec: matvec.cu's bandwidth-shaped kernels where the layout allows, else one warp
//           per output row streams the row once for all n tokens;
//   n > 8   GEMM: 64 tokens x 64 rows per CUDA block, K in steps of 32, each thread 4x4 outputs;
//           the weight tile is decoded into shared memory as fp32.
// A weight source is a functor W(r, c) -> float plus Prepare() (the packed codebook goes to
// shared memory once per CUDA block).
#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kMaxVecTokens = 8;

template <Elem E>
struct DenseSource {
  DevDense w;
  __device__ void Prepare(float*) {}
  __device__ float operator()(int64_t r, int64_t c) const {
    return LoadElem<E>(w.data, r * w.in + c);
  }
};

struct PackedSource {
  DevPacked w;
  const float* book = nullptr;
  // The codebook (<= 256 levels) into shared memory; every thread of the block calls it.
  __device__ void Prepare(float* smem_book) {
    if (w.affine) return;
    for (int i = threadIdx.x; i < w.levels; i += blockDim.x) smem_book[i] = w.codebook[i];
    __syncthreads();
    book = smem_book;
  }
  __device__ float operator()(int64_t r, int64_t c) const { return PackedAt(w, book, r, c); }
};

// One warp per output row (8 warps per CUDA block); lanes stride over the row's columns.
template <typename Src>
__global__ void MatVecKernel(const float* __restrict__ x, int n, int64_t out, int64_t in, Src src,
                             const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float book[256];
  src.Prepare(book);
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (r >= out) return;
  float acc[kMaxVecTokens] = {};
  for (int64_t c = lane; c < in; c += 32) {
    const float w = src(r, c);
#pragma unroll
    for (int t = 0; t < kMaxVecTokens; ++t)
      if (t < n) acc[t] += w * __ldg(x + t * in + c);
  }
#pragma unroll
  for (int t = 0; t < kMaxVecTokens; ++t) {
    if (t >= n) break;
    const float v = WarpSum(acc[t]);
    if (lane == 0) y[t * out + r] = v + (bias ? bias[r] : 0.0f);
  }
}

constexpr int kBM = 64, kBN = 64, kBK = 32, kGemmThreads = 256;

template <typename Src>
__global__ void __launch_bounds__(kGemmThreads)
    GemmKernel(const float* __restrict__ x, int64_t n, int64_t out, int64_t in, Src src,
               const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float book[256];
  __shared__ float xs[kBK][kBM + 4];  // x tile, transposed: xs[k][token]
  __shared__ float ws[kBK][kBN + 4];  // weight tile, transposed: ws[k][row]
  src.Prepare(book);
  const int64_t m0 = int64_t(blockIdx.y) * kBM, o0 = int64_t(blockIdx.x) * kBN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < in; k0 += kBK) {
    for (int e = tid; e < kBM * kBK; e += kGemmThreads) {
      const int i = e / kBK, k = e % kBK;
      const int64_t gm = m0 + i, go = o0 + i, gk = k0 + k;
      const bool kin = gk < in;
      xs[k][i] = (kin && gm < n) ? __ldg(x + gm * in + gk) : 0.0f;
      ws[k][i] = (kin && go < out) ? src(go, gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kBK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = xs[k][ty * 4 + i], b[i] = ws[k][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty * 4 + i;
    if (gm >= n) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t go = o0 + tx * 4 + j;
      if (go < out) y[gm * out + go] = acc[i][j] + (bias ? bias[go] : 0.0f);
    }
  }
}

template <Elem E>
bool FastMatVec(const float* x, int64_t n, const DenseSource<E>& src, const float* bias, float* y,
                cudaStream_t s) {
  return FastDenseMatVec(x, n, src.w, bias, y, s);
}
bool FastMatVec(const float* x, int64_t n, const PackedSource& src, const float* bias, float* y,
                cudaStream_t s) {
  return FastPackedMatVec(x, n, src.w, bias, y, s);
}

template <typename Src>
void Launch(const float* x, int64_t n, int64_t out, int64_t in, const Src& src, const float* bias,
            float* y, cudaStream_t s) {
  if (n <= 0 || out <= 0) return;
  if (n <= kMaxVecTokens) {
    // The bandwidth-shaped kernels of matvec.cu where the layout allows; this one otherwise.
    if (FastMatVec(x, n, src, bias, y, s)) return;
    constexpr int kRowsPerBlock = 8;
    TQ_LAUNCH(MatVecKernel, Blocks(out, kRowsPerBlock), kRowsPerBlock * 32, s, x, int(n), out, in,
              src, bias, y);
  } else {
    const dim3 grid(Blocks(out, kBN), Blocks(n, kBM));
    TQ_LAUNCH(GemmKernel, grid, kGemmThreads, s, x, n, out, in, src, bias, y);
  }
}

}  // namespace

void LaunchDenseMatMul(const float* x, int64_t n, const DevDense& w, const float* bias, float* y,
                       cudaStream_t s) {
  switch (w.elem) {
    case Elem::kF32:
      return Launch(x, n, w.out, w.in, DenseSource<Elem::kF32>{w}, bias, y, s);
    case Elem::kF16:
      return Launch(x, n, w.out, w.in, DenseSource<Elem::kF16>{w}, bias, y, s);
    case Elem::kBF16:
      return Launch(x, n, w.out, w.in, DenseSource<Elem::kBF16>{w}, bias, y, s);
  }
}

void LaunchPackedMatMul(const float* x, int64_t n, const DevPacked& w, const float* bias, float* y,
                        cudaStream_t s) {
  Launch(x, n, w.rows, w.cols, PackedSource{w, w.codebook}, bias, y, s);
}

}  // namespace tq::kernels::cuda
