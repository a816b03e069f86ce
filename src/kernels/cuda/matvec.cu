// Decode products (1..8 tokens) y [n, out] = x [n, in] · Wᵀ (+ bias), shaped for bandwidth:
// each warp owns kVecRows output rows and streams them once for all n tokens; every lane loads
// whole 16-byte pieces of the rows (a 32-code unit of packed codes, 8 bf16/f16 or 4 f32
// weights), kUnroll of them per row before the first use so that each SM has tens of KiB in
// flight; the input x [n, in] (fp32, L1/L2-resident: 16–57 KiB per token) is read as float4 once
// per warp for its kVecRows rows. Packed codes are expanded with shifts of the loaded words (the
// code index is a compile-time constant after unrolling), looked up in the 16-entry (q2/q3/q4:
// one bank each, conflict free) or 256-entry (q8) codebook in shared memory, and multiplied
// unscaled; the group scale multiplies each 16-code half's partial sum. fp32 accumulation,
// warp-shuffle reduction, one store per (token, row).
//
// Eligible (the host checks, else matmul.cu's generic kernels run): packed q2/q3/q4/q8,
// codebook or affine, cols % 32 == 0, group size a multiple of 16, rows stored unit after unit
// (row_bytes = cols / 32 · unit bytes), codes aligned to the unit load; dense rows a multiple of
// 16 bytes, 16-byte aligned; x 16-byte aligned.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/packed_unit.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kVecTokens = 8;  // the most tokens of one call (matmul.cu's kMaxVecTokens)
constexpr int kVecWarps = 4;   // warps per CUDA block
constexpr int kVecRows = 2;    // output rows per warp (each x load serves all of them)

template <int F>
inline constexpr int kPackedUnroll = F == kQ8 ? 2 : 4;

// Codebook (kAffine false: scale · book[code]) or affine (min + scale · code) rows; kNT tokens
// at most (1: the decode step, its accumulators alone in registers; 8: up to 8, n at run time).
// gshift = log2(group size): the group of code c is c >> gshift (no division in the loop).
template <int F, bool kAffine, int kNT>
__global__ void __launch_bounds__(kVecWarps * 32)
    PackedMatVecKernel(const float* __restrict__ x, int n, DevPacked w, int gshift,
                       const float* __restrict__ bias, float* __restrict__ y) {
  constexpr int kU = kPackedUnroll<F>;
  constexpr int kUB = kUnitBytes<F>;
  __shared__ float book[256];
  if (!kAffine) {
    for (int i = threadIdx.x; i < w.levels; i += blockDim.x) book[i] = w.codebook[i];
    __syncthreads();
  }
  const int lane = threadIdx.x & 31;
  const int64_t r0 = (int64_t(blockIdx.x) * kVecWarps + threadIdx.x / 32) * kVecRows;
  if (r0 >= w.rows) return;
  const int units = int(w.cols / 32), in = int(w.cols);
  const uint8_t* codes[kVecRows];
  int64_t group0[kVecRows];  // the row's first group
#pragma unroll
  for (int i = 0; i < kVecRows; ++i) {
    const int64_t r = r0 + i < w.rows ? r0 + i : w.rows - 1;
    codes[i] = w.codes + r * w.row_bytes;
    group0[i] = r * (w.cols >> gshift);
  }
  float acc[kVecRows][kNT] = {};
  for (int u0 = lane; u0 < units; u0 += 32 * kU) {
    Unit<F> q[kU][kVecRows];
    float s[kU][kVecRows][2], m[kU][kVecRows][2];
#pragma unroll
    for (int v = 0; v < kU; ++v) {
      const int u = u0 + 32 * v;
      if (u >= units) break;
      const int gl = (u * 32) >> gshift, gh = (u * 32 + 16) >> gshift;
#pragma unroll
      for (int i = 0; i < kVecRows; ++i) {
        q[v][i] = LoadUnit<F>(codes[i] + u * kUB);
        s[v][i][0] = PackedScale(w, group0[i] + gl);
        s[v][i][1] = gh == gl ? s[v][i][0] : PackedScale(w, group0[i] + gh);
        if (kAffine) {
          m[v][i][0] = F16(__ldg(w.mins + group0[i] + gl));
          m[v][i][1] = F16(__ldg(w.mins + group0[i] + gh));
        }
      }
    }
#pragma unroll
    for (int v = 0; v < kU; ++v) {
      const int u = u0 + 32 * v;
      if (u >= units) break;
      const float* xu = x + u * 32;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float part[kVecRows][kNT] = {};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int j0 = half * 16 + 4 * k;
          float wv[kVecRows][4];
#pragma unroll
          for (int i = 0; i < kVecRows; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              if constexpr (kAffine) {
                const int c = UnitCode<F>(q[v][i], j0 + e);
                wv[i][e] = m[v][i][half] + s[v][i][half] * float(c);
              } else {
                wv[i][e] = BookIndex<F>(q[v][i])(book, j0 + e);
              }
            }
#pragma unroll
          for (int t = 0; t < kNT; ++t) {
            if (t >= n) break;
            const float4 xv = __ldg(reinterpret_cast<const float4*>(xu + t * in + j0));
#pragma unroll
            for (int i = 0; i < kVecRows; ++i)
              part[i][t] += wv[i][0] * xv.x + wv[i][1] * xv.y + wv[i][2] * xv.z + wv[i][3] * xv.w;
          }
        }
#pragma unroll
        for (int i = 0; i < kVecRows; ++i)
#pragma unroll
          for (int t = 0; t < kNT; ++t)
            acc[i][t] += kAffine ? part[i][t] : s[v][i][half] * part[i][t];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kVecRows; ++i) {
    if (r0 + i >= w.rows) break;
#pragma unroll
    for (int t = 0; t < kNT; ++t) {
      if (t >= n) break;
      const float sum = WarpSum(acc[i][t]);
      if (lane == 0) y[t * w.rows + r0 + i] = sum + (bias ? bias[r0 + i] : 0.0f);
    }
  }
}

// 1..8 tokens through packed rows with x staged in shared memory (where n · cols fits): the L1 path
// above reads x at a stride of 128 bytes across the lanes (each lane owns a unit: 32 wavefronts per
// 16-byte load, the L1 pipe saturated at ~12% of DRAM bandwidth on the H200), so here the block
// first copies x once into shared memory, each 32-float unit padded to 36 floats: a warp's float4
// reads of 32 different units hit 8 distinct 16-byte bank groups per quarter warp, 4 wavefronts.
// 8 warps x 2 rows per pass; a block covers rows_per_block rows (a multiple of 16) so that x is
// copied once per many rows.
constexpr int kSmemWarps = 8, kSmemPad = 36;
// Resident blocks per SM asked of the compiler for the 1-token codebook kernels (<= 80 registers
// a thread, no spills; SmemRowsPerBlock plans three blocks per SM).
constexpr int kSmemBlocksPerSm = 3;

template <int F, bool kAffine, int kNT>
__device__ __forceinline__ void PackedMatVecSmemRows(const float* __restrict__ x, int n,
                                                     const DevPacked& w, int gshift, int64_t first,
                                                     int64_t last, const float* __restrict__ bias,
                                                     float* __restrict__ y) {
  constexpr int kU = kPackedUnroll<F>;
  constexpr int kUB = kUnitBytes<F>;
  float* book = DynamicShared();
  float* xs = book + 256;
  const int units = int(w.cols / 32);
  if (!kAffine)
    for (int i = threadIdx.x; i < w.levels; i += blockDim.x) book[i] = w.codebook[i];
  const int xstride = units * kSmemPad;  // floats per token in shared memory
  for (int t = 0; t < n; ++t)
    for (int i = threadIdx.x * 4; i < units * 32; i += blockDim.x * 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(x + int64_t(t) * units * 32 + i));
      *reinterpret_cast<float4*>(xs + t * xstride + (i >> 5) * kSmemPad + (i & 31)) = v;
    }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  for (int64_t r0 = first + warp * kVecRows; r0 < last; r0 += kSmemWarps * kVecRows) {
    const uint8_t* codes[kVecRows];
    int64_t group0[kVecRows];
#pragma unroll
    for (int i = 0; i < kVecRows; ++i) {
      const int64_t r = r0 + i < w.rows ? r0 + i : w.rows - 1;
      codes[i] = w.codes + r * w.row_bytes;
      group0[i] = r * (w.cols >> gshift);
    }
    float acc[kVecRows][kNT] = {};
    for (int u0 = lane; u0 < units; u0 += 32 * kU) {
      Unit<F> q[kU][kVecRows];
      float s[kU][kVecRows][2], m[kU][kVecRows][2];
#pragma unroll
      for (int v = 0; v < kU; ++v) {
        const int u = u0 + 32 * v;
        if (u >= units) break;
        const int gl = (u * 32) >> gshift, gh = (u * 32 + 16) >> gshift;
#pragma unroll
        for (int i = 0; i < kVecRows; ++i) {
          q[v][i] = LoadUnit<F>(codes[i] + u * kUB);
          s[v][i][0] = PackedScale(w, group0[i] + gl);
          s[v][i][1] = gh == gl ? s[v][i][0] : PackedScale(w, group0[i] + gh);
          if (kAffine) {
            m[v][i][0] = F16(__ldg(w.mins + group0[i] + gl));
            m[v][i][1] = F16(__ldg(w.mins + group0[i] + gh));
          }
        }
      }
#pragma unroll
      for (int v = 0; v < kU; ++v) {
        const int u = u0 + 32 * v;
        if (u >= units) break;
        const float* xu = xs + u * kSmemPad;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float part[kVecRows][kNT] = {};
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const int j0 = half * 16 + 4 * k;
            float wv[kVecRows][4];
#pragma unroll
            for (int i = 0; i < kVecRows; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                if constexpr (kAffine) {
                  const int c = UnitCode<F>(q[v][i], j0 + e);
                  wv[i][e] = m[v][i][half] + s[v][i][half] * float(c);
                } else {
                  wv[i][e] = BookIndex<F>(q[v][i])(book, j0 + e);
                }
              }
#pragma unroll
            for (int t = 0; t < kNT; ++t) {
              if (t >= n) break;
              const float4 xv = *reinterpret_cast<const float4*>(xu + t * xstride + j0);
#pragma unroll
              for (int i = 0; i < kVecRows; ++i)
                part[i][t] += wv[i][0] * xv.x + wv[i][1] * xv.y + wv[i][2] * xv.z + wv[i][3] * xv.w;
            }
          }
#pragma unroll
          for (int i = 0; i < kVecRows; ++i)
#pragma unroll
            for (int t = 0; t < kNT; ++t)
              acc[i][t] += kAffine ? part[i][t] : s[v][i][half] * part[i][t];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kVecRows; ++i)
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        if (t >= n) break;
        const float sum = WarpSum(acc[i][t]);
        if (lane == 0 && r0 + i < last) y[t * w.rows + r0 + i] = sum + (bias ? bias[r0 + i] : 0.0f);
      }
  }
}

template <int F, bool kAffine, int kNT>
__global__ void __launch_bounds__(kSmemWarps * 32, kNT == 1 && !kAffine ? kSmemBlocksPerSm : 1)
    PackedMatVecSmemKernel(const float* __restrict__ x, int n, DevPacked w, int gshift,
                           int rows_per_block, const float* __restrict__ bias,
                           float* __restrict__ y) {
  const int64_t first = int64_t(blockIdx.x) * rows_per_block;
  const int64_t last = first + rows_per_block < w.rows ? first + rows_per_block : w.rows;
  PackedMatVecSmemRows<F, kAffine, kNT>(x, n, w, gshift, first, last, bias, y);
}

// Up to kMaxMatVecGroup products over one input in one launch (q/k/v, gate/up): the blocks
// [block0[g], block0[g + 1]) compute member g's rows, rows_per_block[g] each.
constexpr int kMaxMatVecGroup = 4;
struct DevPackedGroup {
  DevPacked w[kMaxMatVecGroup];
  const float* bias[kMaxMatVecGroup] = {};
  float* y[kMaxMatVecGroup] = {};
  int block0[kMaxMatVecGroup + 1] = {};
  int rows_per_block[kMaxMatVecGroup] = {};
  int count = 0;
};

template <int F, bool kAffine, int kNT>
__global__ void __launch_bounds__(kSmemWarps * 32, kNT == 1 && !kAffine ? kSmemBlocksPerSm : 1)
    PackedMatVecGroupKernel(const float* __restrict__ x, int n, DevPackedGroup g, int gshift) {
  // The member's view through shared memory: indexing the parameter struct at run time would
  // copy it into registers (and spill).
  __shared__ DevPacked w;
  int m = 0;
  while (m + 1 < g.count && int(blockIdx.x) >= g.block0[m + 1]) ++m;
  if (threadIdx.x == 0) w = g.w[m];
  __syncthreads();
  const int64_t first = int64_t(int(blockIdx.x) - g.block0[m]) * g.rows_per_block[m];
  const int64_t last = first + g.rows_per_block[m] < w.rows ? first + g.rows_per_block[m] : w.rows;
  PackedMatVecSmemRows<F, kAffine, kNT>(x, n, w, gshift, first, last, g.bias[m], g.y[m]);
}

// Dense rows: kPer elements per 16-byte load (8 bf16/f16, 4 f32), kept as loaded (4 registers)
// until used.
template <Elem E>
inline constexpr int kPer = E == Elem::kF32 ? 4 : 8;

// Element e (0 <= e < kPer) of a loaded piece.
template <Elem E>
__device__ __forceinline__ float PieceElem(const uint4& q, int e) {
  const uint32_t word = e < (E == Elem::kF32 ? 1 : 2)   ? q.x
                        : e < (E == Elem::kF32 ? 2 : 4) ? q.y
                        : e < (E == Elem::kF32 ? 3 : 6) ? q.z
                                                        : q.w;
  if constexpr (E == Elem::kF32) {
    return __uint_as_float(word);
  } else {
    const uint16_t h = uint16_t((e & 1) ? word >> 16 : word & 0xffffu);
    return E == Elem::kBF16 ? Bf16(h) : F16(h);
  }
}

template <Elem E, int kNT>
__global__ void __launch_bounds__(kVecWarps * 32)
    DenseMatVecKernel(const float* __restrict__ x, int n, DevDense w,
                      const float* __restrict__ bias, float* __restrict__ y) {
  constexpr int kP = kPer<E>, kU = 4;
  const int lane = threadIdx.x & 31;
  const int64_t r0 = (int64_t(blockIdx.x) * kVecWarps + threadIdx.x / 32) * kVecRows;
  if (r0 >= w.out) return;
  const int pieces = int(w.in / kP), in = int(w.in);
  const uint4* rows[kVecRows];
#pragma unroll
  for (int i = 0; i < kVecRows; ++i)
    rows[i] = static_cast<const uint4*>(w.data) + (r0 + i < w.out ? r0 + i : w.out - 1) * pieces;
  float acc[kVecRows][kNT] = {};
  for (int p0 = lane; p0 < pieces; p0 += 32 * kU) {
    uint4 q[kU][kVecRows];
#pragma unroll
    for (int v = 0; v < kU; ++v) {
      const int p = p0 + 32 * v;
      if (p >= pieces) break;
#pragma unroll
      for (int i = 0; i < kVecRows; ++i) q[v][i] = __ldg(rows[i] + p);
    }
#pragma unroll
    for (int v = 0; v < kU; ++v) {
      const int p = p0 + 32 * v;
      if (p >= pieces) break;
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        if (t >= n) break;
        const float* xp = x + t * in + p * kP;
#pragma unroll
        for (int k = 0; k < kP; k += 4) {
          const float4 xv = __ldg(reinterpret_cast<const float4*>(xp + k));
#pragma unroll
          for (int i = 0; i < kVecRows; ++i)
            acc[i][t] += PieceElem<E>(q[v][i], k) * xv.x + PieceElem<E>(q[v][i], k + 1) * xv.y +
                         PieceElem<E>(q[v][i], k + 2) * xv.z + PieceElem<E>(q[v][i], k + 3) * xv.w;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kVecRows; ++i) {
    if (r0 + i >= w.out) break;
#pragma unroll
    for (int t = 0; t < kNT; ++t) {
      if (t >= n) break;
      const float sum = WarpSum(acc[i][t]);
      if (lane == 0) y[t * w.out + r0 + i] = sum + (bias ? bias[r0 + i] : 0.0f);
    }
  }
}

bool Aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

constexpr int kVecRowsPerBlock = kVecWarps * kVecRows;

// Dynamic shared memory of the staged-x kernel: the codebook and the padded x.
inline size_t SmemBytes(int64_t cols, int n) {
  return size_t(256 + int64_t(n) * (cols / 32) * kSmemPad) * 4;
}
constexpr size_t kMaxSmem = 200 * 1024;  // of the H200's 227 KiB per block

// Rows per block for `rows` rows: about three blocks per SM of a 132-SM part (80 registers a
// thread and ~20 KiB of shared memory let three stay resident), each at least one pass of 16.
inline int64_t SmemRowsPerBlock(int64_t rows) {
  constexpr int64_t kPass = kSmemWarps * kVecRows, kTargetBlocks = 396;
  const int64_t per = (rows + kTargetBlocks - 1) / kTargetBlocks;
  return (per + kPass - 1) / kPass * kPass;
}

// Raises `kernel`'s dynamic shared memory limit to kMaxSmem (each caller keeps its own
// once-flag: one per kernel instantiation).
template <typename K>
bool RaiseSmemLimit(K* kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxSmem)) ==
         cudaSuccess;
}

template <int F, bool kAffine, int kNT>
void LaunchPackedSmem(const float* x, int n, const DevPacked& w, int gshift, const float* bias,
                      float* y, cudaStream_t s) {
  auto* kernel = PackedMatVecSmemKernel<F, kAffine, kNT>;
  static const bool raised = RaiseSmemLimit(kernel);  // once per instantiation
  (void)raised;
  const int64_t per = SmemRowsPerBlock(w.rows);
  TQ_LAUNCH_SMEM(kernel, Blocks(w.rows, int(per)), kSmemWarps * 32, SmemBytes(w.cols, n), s, x, n,
                 w, gshift, int(per), bias, y);
}

template <int F>
void LaunchPacked(const float* x, int n, const DevPacked& w, const float* bias, float* y,
                  cudaStream_t s) {
  const int gshift = CeilLog2(w.group_size);
  if (SmemBytes(w.cols, n) <= kMaxSmem) {  // 1 token up to 45K columns, 8 up to 5.6K
    if (n == 1) {
      if (w.affine) return LaunchPackedSmem<F, true, 1>(x, n, w, gshift, bias, y, s);
      return LaunchPackedSmem<F, false, 1>(x, n, w, gshift, bias, y, s);
    }
    if (w.affine) return LaunchPackedSmem<F, true, kVecTokens>(x, n, w, gshift, bias, y, s);
    return LaunchPackedSmem<F, false, kVecTokens>(x, n, w, gshift, bias, y, s);
  }
  // (pointers: the templates' commas would split TQ_LAUNCH's arguments)
  auto* kernel =
      w.affine ? PackedMatVecKernel<F, true, kVecTokens> : PackedMatVecKernel<F, false, kVecTokens>;
  TQ_LAUNCH(kernel, Blocks(w.rows, kVecRowsPerBlock), kVecWarps * 32, s, x, n, w, gshift, bias, y);
}

template <Elem E>
void LaunchDense(const float* x, int n, const DevDense& w, const float* bias, float* y,
                 cudaStream_t s) {
  auto* kernel = n == 1 ? DenseMatVecKernel<E, 1> : DenseMatVecKernel<E, kVecTokens>;
  TQ_LAUNCH(kernel, Blocks(w.out, kVecRowsPerBlock), kVecWarps * 32, s, x, n, w, bias, y);
}

}  // namespace

bool FastPackedMatVec(const float* x, int64_t n, const DevPacked& w, const float* bias, float* y,
                      cudaStream_t s) {
  // Power-of-two groups (every converter's) and 32-bit unit indices.
  if (n < 1 || n > kVecTokens || !UnitLayout(w) || !Aligned(x, 16) ||
      (w.group_size & (w.group_size - 1)) || w.cols >= (int64_t(1) << 30))
    return false;
  if (n == 1 &&
      (MmaPackedMatVec(x, &w, &bias, &y, 1, nullptr, s) || TiledPackedMatVec(x, w, bias, y, s)))
    return true;
  switch (w.format) {
    case kQ2:
      LaunchPacked<kQ2>(x, int(n), w, bias, y, s);
      break;
    case kQ3:
      LaunchPacked<kQ3>(x, int(n), w, bias, y, s);
      break;
    case kQ4:
      LaunchPacked<kQ4>(x, int(n), w, bias, y, s);
      break;
    default:
      LaunchPacked<kQ8>(x, int(n), w, bias, y, s);
      break;
  }
  return true;
}

namespace {

template <int F, bool kAffine, int kNT>
void LaunchGroup(const float* x, int n, const DevPackedGroup& g, int gshift, cudaStream_t s) {
  auto* kernel = PackedMatVecGroupKernel<F, kAffine, kNT>;
  static const bool raised = RaiseSmemLimit(kernel);  // once per instantiation
  (void)raised;
  TQ_LAUNCH_SMEM(kernel, unsigned(g.block0[g.count]), kSmemWarps * 32, SmemBytes(g.w[0].cols, n), s,
                 x, n, g, gshift);
}

template <int F>
void LaunchGroupOf(const float* x, int n, const DevPackedGroup& g, int gshift, cudaStream_t s) {
  const bool affine = g.w[0].affine != 0;
  if (n == 1) {
    if (affine) return LaunchGroup<F, true, 1>(x, n, g, gshift, s);
    return LaunchGroup<F, false, 1>(x, n, g, gshift, s);
  }
  if (affine) return LaunchGroup<F, true, kVecTokens>(x, n, g, gshift, s);
  return LaunchGroup<F, false, kVecTokens>(x, n, g, gshift, s);
}

}  // namespace

bool FastPackedMatVecGroup(const float* x, int64_t n, const DevPacked* ws,
                           const float* const* biases, float* const* ys, int count,
                           cudaStream_t s) {
  if (count < 1 || count > kMaxMatVecGroup || n < 1 || n > kVecTokens || !Aligned(x, 16))
    return false;
  if (n == 1 && (MmaPackedMatVec(x, ws, biases, ys, count, nullptr, s) ||
                 TiledPackedMatVecGroup(x, ws, biases, ys, count, s)))
    return true;
  const DevPacked& w0 = ws[0];
  if (SmemBytes(w0.cols, int(n)) > kMaxSmem) return false;
  DevPackedGroup g;
  g.count = count;
  for (int i = 0; i < count; ++i) {
    const DevPacked& w = ws[i];
    if (!UnitLayout(w) || (w.group_size & (w.group_size - 1)) || w.cols >= (int64_t(1) << 30) ||
        w.format != w0.format || w.affine != w0.affine || w.cols != w0.cols ||
        w.group_size != w0.group_size || w.format < kQ2 || w.format > kQ8)
      return false;
    g.w[i] = w;
    g.bias[i] = biases[i];
    g.y[i] = ys[i];
    g.rows_per_block[i] = int(SmemRowsPerBlock(w.rows));
    const int64_t blocks = (w.rows + g.rows_per_block[i] - 1) / g.rows_per_block[i];
    if (int64_t(g.block0[i]) + blocks >= (int64_t(1) << 30)) return false;
    g.block0[i + 1] = g.block0[i] + int(blocks);
  }
  const int gshift = CeilLog2(w0.group_size);
  switch (w0.format) {
    case kQ2:
      LaunchGroupOf<kQ2>(x, int(n), g, gshift, s);
      break;
    case kQ3:
      LaunchGroupOf<kQ3>(x, int(n), g, gshift, s);
      break;
    case kQ4:
      LaunchGroupOf<kQ4>(x, int(n), g, gshift, s);
      break;
    default:
      LaunchGroupOf<kQ8>(x, int(n), g, gshift, s);
      break;
  }
  return true;
}

bool FastDenseMatVec(const float* x, int64_t n, const DevDense& w, const float* bias, float* y,
                     cudaStream_t s) {
  const int64_t esize = w.elem == Elem::kF32 ? 4 : 2;
  if (n < 1 || n > kVecTokens || (w.in * esize) % 16 || !Aligned(w.data, 16) || !Aligned(x, 16))
    return false;
  if (w.in >= (int64_t(1) << 30)) return false;
  switch (w.elem) {
    case Elem::kF32:
      LaunchDense<Elem::kF32>(x, int(n), w, bias, y, s);
      break;
    case Elem::kF16:
      LaunchDense<Elem::kF16>(x, int(n), w, bias, y, s);
      break;
    case Elem::kBF16:
      LaunchDense<Elem::kBF16>(x, int(n), w, bias, y, s);
      break;
  }
  return true;
}

}  // namespace tq::kernels::cuda
