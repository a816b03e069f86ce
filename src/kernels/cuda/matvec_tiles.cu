// The decode step's packed product (1 token): y [out] = W x (+ bias), W packed q2/q3/q4/q8 in the
// unit layout (packed_unit.cuh), shaped so that loads stay in flight while the warps compute.
//
// Columns are cut into tiles of 32 units (1,024 columns): lane l of a warp always owns unit l of
// its tile, so its 32 inputs live in registers for every row the warp visits (no shared-memory
// reads of x: matvec.cu's kernel spent one LDS.128 per 4 weights on them). A warp walks its rows
// with a ring of kRing rows' units and scales in registers: row k is computed while rows k + 1 ..
// k + kRing - 1 are loading, and its slot is refilled with row k + kRing at once. Per weight: a
// code extract, one codebook read from shared memory (16 entries for q4: one bank each, conflict
// free), one FMA. Each row's lane sum is a warp reduction, then one shared-memory atomic add per
// (row, warp); the tiles of a row are summed there and the block writes y once.
//
// Block shape (TileShape, from the host): T tiles; warps per row group P = T when T <= 8 (G = 8 / T
// row groups share a block), else P = ceil(T / ceil(T / 8)) warps that each take ceil(T / 8)
// tiles (G = 1). Rows: a block covers rows_per_block of them (row group g takes rows g, g + G,
// ...), sized for about three blocks per SM.
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/packed_unit.cuh"

namespace tq::kernels::cuda {
namespace {

// Rows of units in flight per warp: about 2 KiB a warp (q8 units are 32 bytes a lane, q2 8).
template <int F>
inline constexpr int kRing = F == kQ8   ? 2
                             : F == kQ2 ? 6
                                        : 3;
constexpr int kMaxTileRows = 1024;   // rows a block may cover (its shared partial sums)
constexpr int kTileBlocksPerSm = 3;  // resident blocks the launch bounds ask for

struct TileShape {
  int tiles = 1;     // T: ceil(units / 32)
  int per_warp = 1;  // tiles a warp visits
  int P = 1;         // warps of a row group
  int G = 1;         // row groups of a block
  int rows_per_block = 1;
};

// A ring slot: one row's unit (codes), its two half scales as raw 16-bit fields (fp16 bits or
// e8 codes: half 0 in the low bits) and, for affine rows, the two fp16 minimums likewise.
template <int F>
struct Slot {
  Unit<F> q;
  uint32_t s;
  uint32_t m;
};

// The raw scales (and minimums) of row r's unit u, packed as a Slot holds them.
template <bool kAffine>
__device__ __forceinline__ void LoadRawScales(const DevPacked& w, int64_t r, int u, int gshift,
                                              uint32_t& s, uint32_t& m) {
  const int64_t g0 = r * (w.cols >> gshift);
  const int gl = (u * 32) >> gshift, gh = (u * 32 + 16) >> gshift;
  uint32_t lo, hi;
  if (w.scale_codes) {
    lo = __ldg(w.scale_codes + g0 + gl);
    hi = gh == gl ? lo : __ldg(w.scale_codes + g0 + gh);
  } else {
    lo = __ldg(w.scales + g0 + gl);
    hi = gh == gl ? lo : __ldg(w.scales + g0 + gh);
  }
  s = lo | hi << 16;
  if (kAffine) m = uint32_t(__ldg(w.mins + g0 + gl)) | uint32_t(__ldg(w.mins + g0 + gh)) << 16;
}

template <int F, bool kAffine>
__device__ __forceinline__ void LoadSlot(Slot<F>& sl, const DevPacked& w, int64_t r, int u,
                                         int gshift, bool live) {
  if (!live) return;
  sl.q = LoadUnit<F>(w.codes + r * w.row_bytes + int64_t(u) * kUnitBytes<F>);
  LoadRawScales<kAffine>(w, r, u, gshift, sl.s, sl.m);
}

// This lane's share of row · x: its unit's 32 codes against its 32 inputs.
template <int F, bool kAffine>
__device__ __forceinline__ float SlotDot(const Slot<F>& sl, const float (&xr)[32],
                                         const float* book, const float* stable, bool e8) {
  float acc = 0.0f;
  const BookIndex<F> bi(sl.q);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t raw = half ? sl.s >> 16 : sl.s & 0xFFFFu;
    const float scale = e8 ? stable[raw] : F16(uint16_t(raw));
    float part = 0.0f;
    if constexpr (kAffine) {
      const float mn = F16(uint16_t(half ? sl.m >> 16 : sl.m & 0xFFFFu));
      float xsum = 0.0f;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        part += float(UnitCode<F>(sl.q, 16 * half + j)) * xr[16 * half + j];
        xsum += xr[16 * half + j];
      }
      acc += scale * part + mn * xsum;
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j) part += bi(book, 16 * half + j) * xr[16 * half + j];
      acc += scale * part;
    }
  }
  return acc;
}

// --- the cp.async variant (TURBOQUANT_CUDA_MATVEC=async): each warp's ring of units lives in
// shared memory, kAsyncDepth rows deep (a warp keeps 4 KiB of q4 in flight without spending
// registers), filled by cp.async; the scales keep a register ring of the same depth.
constexpr int kAsyncDepth = 8;

// Shared bytes of one warp's ring.
template <int F>
inline constexpr int kAsyncWarpBytes = kAsyncDepth * 32 * kUnitBytes<F>;

// dst (shared) <- one unit at src (global), asynchronously (common.cuh CpAsync).
template <int F>
__device__ __forceinline__ void CpAsyncUnit(uint8_t* dst, const uint8_t* src) {
  if constexpr (F == kQ4 || F == kQ8) {
#pragma unroll
    for (int i = 0; i < kUnitBytes<F>; i += 16) CpAsync(dst + i, src + i, 16);
  } else if constexpr (F == kQ2) {
    CpAsync(dst, src, 8);
  } else {
#pragma unroll
    for (int i = 0; i < kUnitBytes<F>; i += 4) CpAsync(dst + i, src + i, 4);
  }
}

// A unit from shared memory (the cp.async ring).
template <int F>
__device__ __forceinline__ Unit<F> SharedUnit(const uint8_t* p) {
  Unit<F> u;
  const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
#pragma unroll
  for (int i = 0; i < kUnitBytes<F> / 4; ++i) u.w[i] = q[i];
  return u;
}

template <int F, bool kAffine, bool kAsync>
__device__ __forceinline__ void TileRows(const float* __restrict__ x, const DevPacked& w,
                                         int gshift, const TileShape& sh, int64_t first,
                                         int64_t last, const float* __restrict__ bias,
                                         float* __restrict__ y) {
  __shared__ float book[256];
  __shared__ float stable[256];
  __shared__ float part[kMaxTileRows];
  if (!kAffine)
    for (int i = threadIdx.x; i < w.levels; i += blockDim.x) book[i] = w.codebook[i];
  const bool e8 = w.scale_codes != nullptr;
  if (e8)
    for (int i = threadIdx.x; i < 256; i += blockDim.x) stable[i] = w.scale_table[i];
  const int count = int(last - first);
  for (int i = threadIdx.x; i < count; i += blockDim.x) part[i] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = warp / sh.P, pw = warp % sh.P;
  const int units = int(w.cols / 32);
  // Rows group, group + G, ... of the block: K of them.
  const int K = group < sh.G && group < count ? (count - group + sh.G - 1) / sh.G : 0;
  for (int ti = 0; ti < sh.per_warp && K > 0; ++ti) {
    const int t = pw + ti * sh.P;
    if (t >= sh.tiles) break;
    const int u = t * 32 + lane;
    const bool live = u < units;
    float xr[32];
#pragma unroll
    for (int j = 0; j < 32; j += 4) {
      const float4 v = live ? __ldg(reinterpret_cast<const float4*>(x + int64_t(u) * 32 + j))
                            : float4{0.0f, 0.0f, 0.0f, 0.0f};
      xr[j] = v.x, xr[j + 1] = v.y, xr[j + 2] = v.z, xr[j + 3] = v.w;
    }
    if constexpr (kAsync) {
      // Lane l's slot i: ring + (i · 32 + l) · unit bytes (16-byte loads land conflict free).
      uint8_t* ring = reinterpret_cast<uint8_t*>(DynamicShared()) + warp * kAsyncWarpBytes<F> +
                      lane * kUnitBytes<F>;
      constexpr int kD = kAsyncDepth, kStep = 32 * kUnitBytes<F>;
      uint32_t sr[kD], mr[kD];
      auto issue = [&](int k, int i) {
        if (!live) return;
        const int64_t r = first + group + int64_t(k) * sh.G;
        CpAsyncUnit<F>(ring + i * kStep, w.codes + r * w.row_bytes + int64_t(u) * kUnitBytes<F>);
        LoadRawScales<kAffine>(w, r, u, gshift, sr[i], mr[i]);
      };
#pragma unroll
      for (int i = 0; i < kD; ++i) {
        if (i < K) issue(i, i);
        CpAsyncCommit();
      }
      for (int k0 = 0; k0 < K; k0 += kD) {
#pragma unroll
        for (int i = 0; i < kD; ++i) {
          const int k = k0 + i;
          if (k >= K) break;
          CpAsyncWait<kD - 1>();  // row k's group (the oldest in flight) has landed
          float v = 0.0f;
          if (live) {
            Slot<F> sl;
            sl.q = SharedUnit<F>(ring + i * kStep);
            sl.s = sr[i];
            sl.m = mr[i];
            v = SlotDot<F, kAffine>(sl, xr, book, stable, e8);
          }
          if (k + kD < K) issue(k + kD, i);
          CpAsyncCommit();
          const float sum = WarpSum(v);
          if (lane == 0) atomicAdd(&part[group + k * sh.G], sum);
        }
      }
      CpAsyncWait<0>();
      continue;
    }
    constexpr int kR = kRing<F>;
    Slot<F> ring[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i)
      if (i < K)
        LoadSlot<F, kAffine>(ring[i], w, first + group + int64_t(i) * sh.G, u, gshift, live);
    for (int k0 = 0; k0 < K; k0 += kR) {
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        const int k = k0 + i;
        if (k >= K) break;
        const float v = live ? SlotDot<F, kAffine>(ring[i], xr, book, stable, e8) : 0.0f;
        if (k + kR < K)
          LoadSlot<F, kAffine>(ring[i], w, first + group + int64_t(k + kR) * sh.G, u, gshift, live);
        const float sum = WarpSum(v);
        if (lane == 0) atomicAdd(&part[group + k * sh.G], sum);
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    y[first + i] = part[i] + (bias ? bias[first + i] : 0.0f);
}

template <int F, bool kAffine, bool kAsync>
__global__ void __launch_bounds__(256, kTileBlocksPerSm)
    TileMatVecKernel(const float* __restrict__ x, DevPacked w, int gshift, TileShape sh,
                     const float* __restrict__ bias, float* __restrict__ y) {
  const int64_t first = int64_t(blockIdx.x) * sh.rows_per_block;
  const int64_t last = first + sh.rows_per_block < w.rows ? first + sh.rows_per_block : w.rows;
  TileRows<F, kAffine, kAsync>(x, w, gshift, sh, first, last, bias, y);
}

// Up to 4 products over one x in one launch (q/k/v, gate/up): blocks [block0[m], block0[m + 1])
// are member m's, each member with its own rows per block.
constexpr int kMaxTileGroup = 4;
struct TileGroup {
  DevPacked w[kMaxTileGroup];
  const float* bias[kMaxTileGroup] = {};
  float* y[kMaxTileGroup] = {};
  int block0[kMaxTileGroup + 1] = {};
  int rows_per_block[kMaxTileGroup] = {};
  int count = 0;
};

template <int F, bool kAffine, bool kAsync>
__global__ void __launch_bounds__(256, kTileBlocksPerSm)
    TileMatVecGroupKernel(const float* __restrict__ x, TileGroup g, int gshift, TileShape sh) {
  // The member's view through shared memory (indexing the parameter at run time would copy the
  // whole struct into registers).
  __shared__ DevPacked w;
  int m = 0;
  while (m + 1 < g.count && int(blockIdx.x) >= g.block0[m + 1]) ++m;
  if (threadIdx.x == 0) w = g.w[m];
  __syncthreads();
  sh.rows_per_block = g.rows_per_block[m];
  const int64_t first = int64_t(int(blockIdx.x) - g.block0[m]) * sh.rows_per_block;
  const int64_t last = first + sh.rows_per_block < w.rows ? first + sh.rows_per_block : w.rows;
  TileRows<F, kAffine, kAsync>(x, w, gshift, sh, first, last, g.bias[m], g.y[m]);
}

// The column split of a `cols`-wide matrix (rows_per_block left to the caller).
TileShape ShapeFor(int64_t cols) {
  TileShape s;
  const int units = int(cols / 32);
  s.tiles = (units + 31) / 32;
  if (s.tiles <= 8) {
    s.P = s.tiles;
    s.G = 8 / s.tiles;
  } else {
    s.per_warp = (s.tiles + 7) / 8;
    s.P = (s.tiles + s.per_warp - 1) / s.per_warp;
    s.G = 1;
  }
  return s;
}

// Rows per block for `rows`: about kTileBlocksPerSm blocks on each of 132 SMs (an H100/H200),
// a multiple of G, at most kMaxTileRows.
int RowsPerBlock(int64_t rows, const TileShape& s) {
  constexpr int64_t kTargetBlocks = 132 * kTileBlocksPerSm;
  int64_t per = (rows + kTargetBlocks - 1) / kTargetBlocks;
  per = (per + s.G - 1) / s.G * s.G;
  const int64_t cap = kMaxTileRows / s.G * s.G;
  return int(per < cap ? per : cap);
}

// TURBOQUANT_CUDA_MATVEC=tiles (register ring) or async (cp.async ring) asks for these kernels.
bool TileKind() {
  const MatVecKind k = MatVecKindFromEnv();
  return k == MatVecKind::kTiles || k == MatVecKind::kAsync;
}

bool TileEligible(const DevPacked& w, const float* x) {
  return UnitLayout(w) && w.format >= kQ2 && w.format <= kQ8 &&
         (w.group_size & (w.group_size - 1)) == 0 && w.cols < (int64_t(1) << 30) &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

// Raises `kernel`'s dynamic shared memory limit to `bytes` when it needs more than the default.
template <typename K>
bool RaiseTileSmem(K* kernel, size_t bytes) {
  return bytes <= 48 * 1024 ||
         cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) ==
             cudaSuccess;
}

template <int F, bool kAffine>
void LaunchTileOne(const float* x, const DevPacked& w, TileShape sh, const float* bias, float* y,
                   cudaStream_t s) {
  sh.rows_per_block = RowsPerBlock(w.rows, sh);
  const unsigned grid = Blocks(w.rows, sh.rows_per_block), threads = 32 * sh.P * sh.G;
  if (MatVecKindFromEnv() == MatVecKind::kAsync) {
    auto* kernel = TileMatVecKernel<F, kAffine, true>;
    const size_t smem = size_t(sh.P * sh.G) * kAsyncWarpBytes<F>;
    static const bool raised = RaiseTileSmem(kernel, 8 * kAsyncWarpBytes<F>);
    (void)raised;
    TQ_LAUNCH_SMEM(kernel, grid, threads, smem, s, x, w, CeilLog2(w.group_size), sh, bias, y);
    return;
  }
  auto* kernel = TileMatVecKernel<F, kAffine, false>;
  TQ_LAUNCH(kernel, grid, threads, s, x, w, CeilLog2(w.group_size), sh, bias, y);
}

template <int F, bool kAffine>
void LaunchTileGroup(const float* x, const TileGroup& g, TileShape sh, cudaStream_t s) {
  const unsigned grid = unsigned(g.block0[g.count]), threads = 32 * sh.P * sh.G;
  if (MatVecKindFromEnv() == MatVecKind::kAsync) {
    auto* kernel = TileMatVecGroupKernel<F, kAffine, true>;
    const size_t smem = size_t(sh.P * sh.G) * kAsyncWarpBytes<F>;
    static const bool raised = RaiseTileSmem(kernel, 8 * kAsyncWarpBytes<F>);
    (void)raised;
    TQ_LAUNCH_SMEM(kernel, grid, threads, smem, s, x, g, CeilLog2(g.w[0].group_size), sh);
    return;
  }
  auto* kernel = TileMatVecGroupKernel<F, kAffine, false>;
  TQ_LAUNCH(kernel, grid, threads, s, x, g, CeilLog2(g.w[0].group_size), sh);
}

template <template <int, bool> class L, typename... A>
void TileByFormat(int format, bool affine, A&&... a) {
  switch (format) {
    case kQ2:
      return affine ? L<kQ2, true>::Run(a...) : L<kQ2, false>::Run(a...);
    case kQ3:
      return affine ? L<kQ3, true>::Run(a...) : L<kQ3, false>::Run(a...);
    case kQ4:
      return affine ? L<kQ4, true>::Run(a...) : L<kQ4, false>::Run(a...);
    default:
      return affine ? L<kQ8, true>::Run(a...) : L<kQ8, false>::Run(a...);
  }
}
template <int F, bool A>
struct TileOneL {
  static void Run(const float* x, const DevPacked& w, const TileShape& sh, const float* bias,
                  float* y, cudaStream_t s) {
    LaunchTileOne<F, A>(x, w, sh, bias, y, s);
  }
};
template <int F, bool A>
struct TileGroupL {
  static void Run(const float* x, const TileGroup& g, const TileShape& sh, cudaStream_t s) {
    LaunchTileGroup<F, A>(x, g, sh, s);
  }
};

}  // namespace

bool TiledPackedMatVec(const float* x, const DevPacked& w, const float* bias, float* y,
                       cudaStream_t s) {
  if (!TileKind() || !TileEligible(w, x) || w.rows <= 0) return false;
  TileByFormat<TileOneL>(w.format, w.affine != 0, x, w, ShapeFor(w.cols), bias, y, s);
  return true;
}

bool TiledPackedMatVecGroup(const float* x, const DevPacked* ws, const float* const* biases,
                            float* const* ys, int count, cudaStream_t s) {
  if (!TileKind() || count < 1 || count > kMaxTileGroup) return false;
  const DevPacked& w0 = ws[0];
  TileGroup g;
  g.count = count;
  const TileShape sh = ShapeFor(w0.cols);
  for (int i = 0; i < count; ++i) {
    const DevPacked& w = ws[i];
    if (!TileEligible(w, x) || w.rows <= 0 || w.format != w0.format || w.affine != w0.affine ||
        w.cols != w0.cols || w.group_size != w0.group_size)
      return false;
    g.w[i] = w;
    g.bias[i] = biases[i];
    g.y[i] = ys[i];
    g.rows_per_block[i] = RowsPerBlock(w.rows, sh);
    const int64_t blocks = (w.rows + g.rows_per_block[i] - 1) / g.rows_per_block[i];
    if (int64_t(g.block0[i]) + blocks >= (int64_t(1) << 30)) return false;
    g.block0[i + 1] = g.block0[i] + int(blocks);
  }
  TileByFormat<TileGroupL>(w0.format, w0.affine != 0, x, g, sh, s);
  return true;
}

}  // namespace tq::kernels::cuda
