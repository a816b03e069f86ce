// Decode-step attention on a plain cache (F32/F16/BF16 rows, [kv_heads, slots, head_dim]) by the
// pipelined split kernel of attention_pipe.cuh: a block per (row, KV head, split) copies tiles of
// kRows positions' key and value rows (16 KiB a stage) into shared memory with cp.async and adds
// them to the group's softmax. attention.cu's warp-split kernel keeps one position's loads in
// flight a warp (8-12 warps an SM): at 32K positions it read an f16 cache at ~0.9 TB/s on the
// H100 (148 µs a layer for 134 MB).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cuda/attention_pipe.cuh"

namespace tq::kernels::cuda {
namespace {

template <Elem E>
inline constexpr int kElemBytes = E == Elem::kF32 ? 4 : 2;
// Positions a stage: 16 KiB of keys and values, at least one tile update a warp.
template <Elem E, int kD>
inline constexpr int kPlainRows = std::max(kAttnWarps* kPipeT<kD>, 8192 / (kD * kElemBytes<E>));

template <Elem E>
__device__ __forceinline__ float SharedElem(const uint8_t* row, int j) {
  if constexpr (E == Elem::kF32) {
    return reinterpret_cast<const float*>(row)[j];
  } else if constexpr (E == Elem::kF16) {
    return F16(reinterpret_cast<const uint16_t*>(row)[j]);
  } else {
    return Bf16(reinterpret_cast<const uint16_t*>(row)[j]);
  }
}

// part [n, heads, splits, 2 + kD] (splits > 1) or out [n, heads, kD] (splits == 1) from q
// [n, heads, kD] and the cache k, v (rows head_stride elements apart a KV head).
template <Elem E, int kD, int kG>
__global__ void __launch_bounds__(kPipeThreads, 3)
    PlainPipedKernel(const float* __restrict__ q, int64_t pos0, const void* k, const void* v,
                     int64_t head_stride, DevAttention p, int64_t chunk, float* __restrict__ part,
                     float* __restrict__ out) {
  GridLaunchDependents();
  constexpr int kP = kD / 32, T = kPipeT<kD>, kRows = kPlainRows<E, kD>;
  constexpr int kRowBytes = kD * kElemBytes<E>, kHalf = kRows * kRowBytes;  // a stage: K | V
  constexpr int kWarpRows = kRows / kAttnWarps;
  auto* smem = reinterpret_cast<uint8_t*>(DynamicShared());
  const auto [i, kvh, split, lo, hi] = SplitOfBlock(pos0, p, chunk);
  const int splits = int(gridDim.z);
  const int G = int(p.num_heads / p.num_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  GroupState<kG, kP> st;
  InitGroup(st, q + (i * p.num_heads + kvh * G) * kD, G, lane);
  const float scale2 = p.scale * kPipeLog2e;
  const int64_t rows = max(int64_t(0), hi - lo), tiles = (rows + kRows - 1) / kRows;
  const auto* kb = static_cast<const uint8_t*>(k) + (kvh * head_stride + lo * kD) * kElemBytes<E>;
  const auto* vb = static_cast<const uint8_t*>(v) + (kvh * head_stride + lo * kD) * kElemBytes<E>;
  auto count_of = [&](int64_t t) { return int(min(int64_t(kRows), rows - t * kRows)); };
  auto issue = [&](int64_t t) {  // tile t's rows (an empty group past the end)
    if (t < tiles) {
      uint8_t* dst = smem + (t % kPipeStages) * 2 * kHalf;
      const int bytes = count_of(t) * kRowBytes;
      CopyRows(dst, kb + t * kHalf, bytes, 16);
      CopyRows(dst + kHalf, vb + t * kHalf, bytes, 16);
    }
    CpAsyncCommit();
  };
  for (int64_t t = 0; t < kPipeStages - 1; ++t) issue(t);
  for (int64_t t = 0; t < tiles; ++t) {
    issue(t + kPipeStages - 1);  // into the stage read two barriers ago
    CpAsyncWait<kPipeStages - 1>();
    __syncthreads();
    const uint8_t* src = smem + (t % kPipeStages) * 2 * kHalf;
    const int c = count_of(t);
    for (int r0 = warp * kWarpRows; r0 < min(c, (warp + 1) * kWarpRows); r0 += T) {
      float kk[T][kP], vv[T][kP];
#pragma unroll
      for (int u = 0; u < T; ++u) {
        const int r = min(r0 + u, c - 1);  // a row past the tile's end repeats the last
#pragma unroll
        for (int e = 0; e < kP; ++e) {
          kk[u][e] = SharedElem<E>(src + r * kRowBytes, lane + 32 * e);
          vv[u][e] = SharedElem<E>(src + kHalf + r * kRowBytes, lane + 32 * e);
        }
      }
      TileUpdate<T, kG, kP>(st, kk, vv, min(T, c - r0), G, scale2, lane);
    }
    __syncthreads();  // before tile t + kPipeStages overwrites this stage
  }
  CpAsyncWait<0>();
  FinishSplit<kD, kG>(st, G, reinterpret_cast<float*>(smem), i, kvh * G, p.num_heads, int(split),
                      splits, part, splits == 1 ? out : nullptr);
}

using PlainKernel = void (*)(const float*, int64_t, const void*, const void*, int64_t, DevAttention,
                             int64_t, float*, float*);

template <Elem E, int kD>
PlainKernel ForGroup(int64_t G) {
  return G > 4 ? PlainPipedKernel<E, kD, 8> : PlainPipedKernel<E, kD, 4>;
}

template <Elem E>
PlainKernel ForDim(int64_t d, int64_t G) {
  return d == 64 ? ForGroup<E, 64>(G) : d == 128 ? ForGroup<E, 128>(G) : ForGroup<E, 256>(G);
}

// The instance and its dynamic shared memory (kernel null: not eligible).
struct Plain {
  PlainKernel kernel = nullptr;
  size_t smem = 0;
};

template <Elem E, int kD>
constexpr size_t PlainSmem(int64_t G) {
  return std::max(size_t(kPipeStages) * 2 * kPlainRows<E, kD> * kD * kElemBytes<E>,
                  size_t(kAttnWarps) * (G > 4 ? 8 : 4) * kD * sizeof(float));
}

template <Elem E>
size_t SmemOf(int64_t d, int64_t G) {
  return d == 64 ? PlainSmem<E, 64>(G) : d == 128 ? PlainSmem<E, 128>(G) : PlainSmem<E, 256>(G);
}

Plain Choose(Elem elem, const DevAttention& p) {
  const char* env = std::getenv("TURBOQUANT_CUDA_KV_SPLIT");
  if (env && std::string(env) == "warp") return {};
  const int64_t d = p.head_dim, G = p.num_heads / p.num_kv_heads;
  if ((d != 64 && d != 128 && d != 256) || G < 1 || G > 8) return {};
  switch (elem) {
    case Elem::kF32:
      return {ForDim<Elem::kF32>(d, G), SmemOf<Elem::kF32>(d, G)};
    case Elem::kF16:
      return {ForDim<Elem::kF16>(d, G), SmemOf<Elem::kF16>(d, G)};
    default:
      return {ForDim<Elem::kBF16>(d, G), SmemOf<Elem::kBF16>(d, G)};
  }
}

}  // namespace

int PlainPipedBlocksPerSm(Elem elem, const DevAttention& p) {
  const Plain c = Choose(elem, p);
  return c.kernel ? PipeOccupancy(c.kernel, c.smem) : 0;
}

bool LaunchPlainPipedSplit(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                           Elem elem, int64_t head_stride, const DevAttention& p, int splits,
                           int64_t chunk, float* part, float* out, cudaStream_t s) {
  const Plain c = Choose(elem, p);
  if (!c.kernel || ((uintptr_t(k) | uintptr_t(v)) & 15)) return false;  // (cudaMalloc'd: never)
  const dim3 grid(unsigned(n), unsigned(p.num_kv_heads), unsigned(splits));
  TQ_LAUNCH_SMEM(c.kernel, grid, kPipeThreads, c.smem, s, q, pos0, k, v, head_stride, p, chunk,
                 part, out);
  return true;
}

}  // namespace tq::kernels::cuda
