// Dense and packed matrix products y [n, out] = x [n, in] · Wᵀ (+ bias), fp32 activations and
// accumulation, W dense (F32/F16/BF16) or packed (codes + group scales + codebook, decoded on
// the fly: the weights stay packed in device memory).
//   n <= 8  matvec: matvec.cu's bandwidth-shaped kernels where the layout allows, else one warp
//           per output row streams the row once for all n tokens;
//   n > 8   GEMM: packed weights on the tensor cores (3xTF32), 64 tokens x 128 rows per CUDA
//           block, the weight tile decoded into shared memory as fp32; dense weights the fp32
//           SIMT tile kernel (64 x 64; on bf16 it measured faster than the tensor-core one).
// A weight source is a functor W(r, c) -> float plus Prepare() (the packed codebook goes to
// shared memory once per CUDA block).
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/packed_unit.cuh"

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

// Tensor-core GEMM (n > 8 tokens): 64 tokens x 128 output rows per CUDA block of 8 warps
// (2 x 4 of 32 x 32), K in steps of 32 through shared memory as fp32 (rows padded to 36
// floats: a warp's fragment reads land in 32 distinct banks). The products run on mma.m16n8k8
// in TF32 split three ways (x = x_hi + x_lo, w likewise, x_hi·w_lo + x_lo·w_hi + x_hi·w_hi,
// fp32 accumulation): about fp32's accuracy at three tensor-core instructions per step, so the
// GPU keeps the CPU's numbers (the conformance bound is fp32's).
// The weight tile is decoded once per block: packed rows of the unit layout a 16-code half per
// thread (packed_unit.cuh), anything else element by element through the source functor.
constexpr int kTM = 64, kTN = 128, kTK = 32, kTPad = kTK + 4, kTcThreads = 256;

// ws[i][k] = W(o0 + i, k0 + k), zero outside the matrix; every thread of the block calls it.
template <typename Src>
__device__ __forceinline__ void LoadWeightTile(float (*ws)[kTPad], const Src& src, int64_t o0,
                                               int64_t k0, int64_t out, int64_t in) {
  for (int e = threadIdx.x; e < kTN * kTK; e += kTcThreads) {
    const int i = e / kTK, k = e % kTK;
    const int64_t go = o0 + i, gk = k0 + k;
    ws[i][k] = (go < out && gk < in) ? src(go, gk) : 0.0f;
  }
}

// Packed rows of the unit layout (F = kQ2..kQ8): the tile's 32 columns are one unit per row;
// thread = (row, half), 16 codes and one group scale each.
template <int F>
__device__ __forceinline__ void LoadUnitTile(float (*ws)[kTPad], const PackedSource& src,
                                             int64_t o0, int64_t k0) {
  const DevPacked& w = src.w;
  const int i = threadIdx.x >> 1, h = threadIdx.x & 1;
  const int64_t go = o0 + i;
  float* dst = &ws[i][16 * h];
  if (go >= w.rows) {
#pragma unroll
    for (int j = 0; j < 16; ++j) dst[j] = 0.0f;
    return;
  }
  const Unit<F> q = LoadUnit<F>(w.codes + go * w.row_bytes + (k0 / 32) * kUnitBytes<F>);
  const int64_t g = go * (w.cols / w.group_size) + (k0 + 16 * h) / w.group_size;
  const float scale = PackedScale(w, g);
  const float mn = w.affine ? F16(__ldg(w.mins + g)) : 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = h ? UnitCode<F>(q, 16 + j) : UnitCode<F>(q, j);
    dst[j] = w.affine ? mn + scale * float(c) : scale * src.book[c];
  }
}

__device__ __forceinline__ void SplitTf32(float v, uint32_t& hi, uint32_t& lo) {
  hi = ToTf32(v);
  lo = ToTf32(v - __uint_as_float(hi));
}

// F = -1: the weight tile through the functor; kQ2..kQ8: LoadUnitTile.
template <typename Src, int F>
__global__ void __launch_bounds__(kTcThreads)
    TcGemmKernel(const float* __restrict__ x, int64_t n, int64_t out, int64_t in, Src src,
                 const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float book[256];
  __shared__ float xs[kTM][kTPad];  // xs[token][k]
  __shared__ float ws[kTN][kTPad];  // ws[row][k]
  src.Prepare(book);
  const int64_t m0 = int64_t(blockIdx.y) * kTM, o0 = int64_t(blockIdx.x) * kTN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = (warp / 4) * 32, wn = (warp % 4) * 32;
  float acc[2][4][4] = {};
  for (int64_t k0 = 0; k0 < in; k0 += kTK) {
    for (int e = tid; e < kTM * kTK; e += kTcThreads) {
      const int i = e / kTK, k = e % kTK;
      const int64_t gm = m0 + i, gk = k0 + k;
      xs[i][k] = (gm < n && gk < in) ? __ldg(x + gm * in + gk) : 0.0f;
    }
    if constexpr (F >= 0) {
      LoadUnitTile<F>(ws, src, o0, k0);
    } else {
      LoadWeightTile(ws, src, o0, k0, out, in);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTK; kk += 8) {
      uint32_t ah[2][4], al[2][4], bh[4][2], bl[4][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = wm + mt * 16 + g;
        SplitTf32(xs[r][kk + t], ah[mt][0], al[mt][0]);
        SplitTf32(xs[r + 8][kk + t], ah[mt][1], al[mt][1]);
        SplitTf32(xs[r][kk + t + 4], ah[mt][2], al[mt][2]);
        SplitTf32(xs[r + 8][kk + t + 4], ah[mt][3], al[mt][3]);
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int c = wn + nt * 8 + g;
        SplitTf32(ws[c][kk + t], bh[nt][0], bl[nt][0]);
        SplitTf32(ws[c][kk + t + 4], bh[nt][1], bl[nt][1]);
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          Mma3xTf32(acc[mt][nt], ah[mt], al[mt], bh[nt], bl[nt]);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t gm = m0 + wm + mt * 16 + g + (e >> 1) * 8;
        const int64_t go = o0 + wn + nt * 8 + 2 * t + (e & 1);
        if (gm < n && go < out) y[gm * out + go] = acc[mt][nt][e] + (bias ? bias[go] : 0.0f);
      }
}

constexpr int kBM = 64, kBN = 64, kBK = 32, kGemmThreads = 256;

// The fp32 SIMT GEMM for dense weights (64 tokens x 64 rows per block, each thread 4x4
// outputs): measured faster than the tensor-core kernel on bf16 (no decode to hide).
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

template <typename Src>
void LaunchGemm(const float* x, int64_t n, int64_t out, int64_t in, const Src& src,
                const float* bias, float* y, cudaStream_t s) {
  if constexpr (!std::is_same_v<Src, PackedSource>) {
    const dim3 grid(Blocks(out, kBN), Blocks(n, kBM));
    TQ_LAUNCH(GemmKernel, grid, kGemmThreads, s, x, n, out, in, src, bias, y);
  } else {
    const dim3 grid(Blocks(out, kTN), Blocks(n, kTM));
    auto* kernel = TcGemmKernel<Src, -1>;
    if (UnitLayout(src.w)) {
      switch (src.w.format) {
        case kQ2:
          kernel = TcGemmKernel<Src, kQ2>;
          break;
        case kQ3:
          kernel = TcGemmKernel<Src, kQ3>;
          break;
        case kQ4:
          kernel = TcGemmKernel<Src, kQ4>;
          break;
        default:
          kernel = TcGemmKernel<Src, kQ8>;
          break;
      }
    }
    TQ_LAUNCH(kernel, grid, kTcThreads, s, x, n, out, in, src, bias, y);
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
    LaunchGemm(x, n, out, in, src, bias, y, s);
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
