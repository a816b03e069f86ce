// The TurboQuant cache's pipelined split kernel (attention_pipe.cuh; attention_compressed.cuh
// says which layouts take it): a block per (row, KV head, split) copies tiles of kTile
// positions' code rows into shared memory with cp.async (the fp16 scales, 2 bytes a row, below
// cp.async's 4, go through registers one tile ahead of their store), decodes them there and adds
// them to the group's softmax. The warp-split kernel of attention_compressed.cu it replaces for
// these layouts kept ~32 positions' loads in flight an SM (8 warps of 247 registers) and ran ~6x
// short of the cache's bandwidth (H100, K4V3, 32K positions: 197 µs a layer for ~30 MB).
// fp16 spans (sink, recent window) are read directly, kT positions a warp at a time, through the
// same tile update.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cuda/attention_compressed.cuh"
#include "kernels/cuda/attention_pipe.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kMaxScales = 4;  // scales a thread carries a tile (kTile · groups <= 512)

template <int kD>
inline constexpr int kTile = kD <= 128 ? 64 : 32;  // positions a stage

// Where a stage keeps what (bytes from the stage's start) and how code rows are copied.
struct PipeShape {
  int kcodes = 0, vcodes = 0;    // [kTile, code_bytes] each
  int kscales = 0, vscales = 0;  // fp16 [kTile, groups] each
  int stage = 0;                 // bytes a stage (a multiple of 16)
  int kw = 4, vw = 4;            // cp.async bytes a copy (16, 8 or 4) of key / value codes
};

// part [n, heads, splits, 2 + kD] from qp [n, heads, kD] (CompressedQueryKernel; no sketch).
template <int kD, int KF, int VF, int kG>
__global__ void __launch_bounds__(kPipeThreads, 2)
    PipedSplitKernel(const float* __restrict__ qp, int64_t pos0, DevCompressedKv kv, DevAttention p,
                     int64_t chunk, PipeShape sh, float* __restrict__ part) {
  GridLaunchDependents();
  constexpr int kP = kD / 32, T = kPipeT<kD>, kTileRows = kTile<kD>;
  constexpr int kWarpRows = kTileRows / kAttnWarps;  // a warp's rows of a tile
  __shared__ float ktab[1][256], vtab[1][256];
  auto* smem = reinterpret_cast<uint8_t*>(DynamicShared());
  const auto [i, kvh, split, lo, hi] = SplitOfBlock(pos0, p, chunk);
  const int splits = int(gridDim.z);
  const int G = int(p.num_heads / p.num_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* qg = qp + (i * p.num_heads + kvh * G) * kD;  // the group's first head
  const float scale2 = p.scale * kPipeLog2e;
  for (int c = threadIdx.x; c < 256; c += kPipeThreads) {
    ktab[0][c] = c < kv.kf.seg[0].levels ? kv.kf.seg[0].table[c] : 0.0f;
    vtab[0][c] = c < kv.vf.seg[0].levels ? kv.vf.seg[0].table[c] : 0.0f;
  }
  GroupState<kG, kP> st;
  InitGroup(st, qg, G, lane);
  const int kcb = int(kv.kf.code_bytes), vcb = int(kv.vf.code_bytes);
  const int kgroups = int(kv.kf.dim / kv.kf.group), vgroups = int(kv.vf.dim / kv.vf.group);
  int kgi[kP], vgi[kP];  // the scale group of channel 32 e
#pragma unroll
  for (int e = 0; e < kP; ++e)
    kgi[e] = int(32 * e / kv.kf.group), vgi[e] = int(32 * e / kv.vf.group);
  __syncthreads();  // the tables

  for (int si = 0; si < kv.num_spans; ++si) {
    const DevSpan& s = kv.spans[si];
    const int64_t a = max(lo, s.begin), b = min(hi, s.end);
    if (a >= b) continue;                                      // (the same for the whole block)
    const int64_t base = kvh * s.head_stride + (a - s.begin);  // slot of position a
    if (!s.coded) {
      for (int64_t t0 = a + warp * T; t0 < b; t0 += kAttnWarps * T) {
        float kk[T][kP], vv[T][kP];
#pragma unroll
        for (int u = 0; u < T; ++u) {
          const int64_t slot = base + (min(t0 + u, b - 1) - a);
#pragma unroll
          for (int e = 0; e < kP; ++e) {
            kk[u][e] = F16(__ldg(s.k16 + slot * kD + lane + 32 * e));
            vv[u][e] = F16(__ldg(s.v16 + slot * kD + lane + 32 * e));
          }
        }
        TileUpdate<T, kG, kP>(st, kk, vv, int(min(int64_t(T), b - t0)), G, scale2, lane);
      }
      continue;
    }
    // The coded span: tiles of kTileRows positions through kPipeStages stages.
    const uint8_t* kc = s.k_codes + base * kcb;
    const uint8_t* vc = s.v_codes + base * vcb;
    const uint16_t* ksc = s.k_scales + base * kgroups;
    const uint16_t* vsc = s.v_scales + base * vgroups;
    const int64_t rows = b - a, tiles = (rows + kTileRows - 1) / kTileRows;
    auto stage_of = [&](int64_t t) { return smem + (t % kPipeStages) * sh.stage; };
    auto count_of = [&](int64_t t) { return int(min(int64_t(kTileRows), rows - t * kTileRows)); };
    auto issue = [&](int64_t t) {  // tile t's code rows (an empty group past the end)
      if (t < tiles) {
        uint8_t* dst = stage_of(t);
        const int64_t r0 = t * kTileRows;
        const int c = count_of(t);
        CopyRows(dst + sh.kcodes, kc + r0 * kcb, c * kcb, sh.kw);
        CopyRows(dst + sh.vcodes, vc + r0 * vcb, c * vcb, sh.vw);
      }
      CpAsyncCommit();
    };
    uint16_t sreg[kMaxScales];  // tile t's scales between their load and their store
    auto load_scales = [&](int64_t t) {
      if (t >= tiles) return;
      const int64_t r0 = t * kTileRows;
      const int c = count_of(t), nk = c * kgroups, total = nk + c * vgroups;
#pragma unroll
      for (int j = 0; j < kMaxScales; ++j) {
        const int e = int(threadIdx.x) + j * kPipeThreads;
        sreg[j] = e < nk      ? __ldg(ksc + r0 * kgroups + e)
                  : e < total ? __ldg(vsc + r0 * vgroups + (e - nk))
                              : uint16_t(0);
      }
    };
    auto store_scales = [&](int64_t t) {
      if (t >= tiles) return;
      uint8_t* dst = stage_of(t);
      auto* ks = reinterpret_cast<uint16_t*>(dst + sh.kscales);
      auto* vs = reinterpret_cast<uint16_t*>(dst + sh.vscales);
      const int c = count_of(t), nk = c * kgroups, total = nk + c * vgroups;
#pragma unroll
      for (int j = 0; j < kMaxScales; ++j) {
        const int e = int(threadIdx.x) + j * kPipeThreads;
        if (e < nk)
          ks[e] = sreg[j];
        else if (e < total)
          vs[e - nk] = sreg[j];
      }
    };
    for (int64_t t = 0; t < kPipeStages - 1; ++t) {
      issue(t);
      load_scales(t);
      store_scales(t);
    }
    for (int64_t t = 0; t < tiles; ++t) {
      // Tile t + kPipeStages - 2's scales (loaded one tile ago) to its stage, tile t + kPipeStages
      // - 1's copies and scale loads issued, then tile t's copies waited for: every stage written
      // here was last read two or more barriers ago.
      if (t > 0) store_scales(t + kPipeStages - 2);
      issue(t + kPipeStages - 1);
      load_scales(t + kPipeStages - 1);
      CpAsyncWait<kPipeStages - 1>();
      __syncthreads();
      const uint8_t* src = stage_of(t);
      const auto* ks = reinterpret_cast<const uint16_t*>(src + sh.kscales);
      const auto* vs = reinterpret_cast<const uint16_t*>(src + sh.vscales);
      const int c = count_of(t);
      for (int r0 = warp * kWarpRows; r0 < min(c, (warp + 1) * kWarpRows); r0 += T) {
        float kk[T][kP], vv[T][kP];
#pragma unroll
        for (int u = 0; u < T; ++u) {
          const int r = min(r0 + u, c - 1);  // a row past the tile's end repeats the last
          DecodeLane<kP, KF, true>(kv.kf, ktab, src + sh.kcodes + r * kcb, ks + r * kgroups, kgi,
                                   lane, kk[u]);
          DecodeLane<kP, VF, true>(kv.vf, vtab, src + sh.vcodes + r * vcb, vs + r * vgroups, vgi,
                                   lane, vv[u]);
        }
        TileUpdate<T, kG, kP>(st, kk, vv, min(T, c - r0), G, scale2, lane);
      }
      __syncthreads();  // before tile t + kPipeStages overwrites this stage
    }
    CpAsyncWait<0>();
  }
  // The stages' memory holds the warps' accumulators now (every stage was last read before a
  // barrier).
  FinishSplit<kD, kG>(st, G, reinterpret_cast<float*>(smem), i, kvh * G, p.num_heads, int(split),
                      splits, part, nullptr);
}

using PipedKernel = void (*)(const float*, int64_t, DevCompressedKv, DevAttention, int64_t,
                             PipeShape, float*);

template <int kD, int VF, int kG>
PipedKernel ForKey(int kf) {
  switch (kf) {
    case kQ2:
      return PipedSplitKernel<kD, kQ2, VF, kG>;
    case kQ3:
      return PipedSplitKernel<kD, kQ3, VF, kG>;
    case kQ4:
      return PipedSplitKernel<kD, kQ4, VF, kG>;
    case kQ8:
      return PipedSplitKernel<kD, kQ8, VF, kG>;
    default:
      return nullptr;
  }
}

template <int kD, int kG>
PipedKernel ForFormats(const DevCompressedKv& kv) {
  switch (kv.vf.seg[0].format) {
    case kQ2:
      return ForKey<kD, kQ2, kG>(kv.kf.seg[0].format);
    case kQ3:
      return ForKey<kD, kQ3, kG>(kv.kf.seg[0].format);
    case kQ4:
      return ForKey<kD, kQ4, kG>(kv.kf.seg[0].format);
    default:
      return nullptr;
  }
}

// The bytes of a cp.async copy dividing both the rows' start address and their size (0: none).
int CopyWidth(const void* codes, int64_t row_bytes) {
  const auto a = uintptr_t(codes) | uintptr_t(row_bytes);
  return a % 16 == 0 ? 16 : a % 8 == 0 ? 8 : a % 4 == 0 ? 4 : 0;
}

// The instance, its stage layout and dynamic shared memory for kv's layout (kernel null: not
// eligible).
struct Piped {
  PipedKernel kernel = nullptr;
  PipeShape shape;
  size_t smem = 0;
};

Piped Choose(const DevCompressedKv& kv, const DevAttention& p) {
  const char* env = std::getenv("TURBOQUANT_CUDA_KV_SPLIT");
  if (env && std::string(env) == "warp") return {};
  const int64_t d = p.head_dim, G = p.num_heads / p.num_kv_heads;
  if ((d != 64 && d != 128 && d != 256) || G < 1 || G > 8 || kv.qjl_matrix ||
      kv.kf.num_segments != 1 || kv.vf.num_segments != 1 || kv.kf.dim != d || kv.vf.dim != d ||
      kv.kf.group % 32 != 0 || kv.vf.group % 32 != 0)
    return {};
  Piped r;
  const int g8 = G > 4;
  r.kernel = d == 64    ? (g8 ? ForFormats<64, 8>(kv) : ForFormats<64, 4>(kv))
             : d == 128 ? (g8 ? ForFormats<128, 8>(kv) : ForFormats<128, 4>(kv))
                        : (g8 ? ForFormats<256, 8>(kv) : ForFormats<256, 4>(kv));
  if (!r.kernel) return {};
  const int tile = d <= 128 ? kTile<128> : kTile<256>;
  const int64_t kcb = kv.kf.code_bytes, vcb = kv.vf.code_bytes;
  int kw = 16, vw = 16;
  for (int si = 0; si < kv.num_spans; ++si) {
    if (!kv.spans[si].coded) continue;
    kw = std::min(kw, CopyWidth(kv.spans[si].k_codes, kcb));
    vw = std::min(vw, CopyWidth(kv.spans[si].v_codes, vcb));
  }
  const int64_t kg = d / kv.kf.group, vg = d / kv.vf.group;
  if (kw == 0 || vw == 0 || tile * (kg + vg) > kMaxScales * kPipeThreads) return {};
  PipeShape& s = r.shape;
  s.kw = kw, s.vw = vw;
  s.kcodes = 0;
  s.vcodes = int(tile * kcb + 15) / 16 * 16;
  s.kscales = s.vcodes + int(tile * vcb + 15) / 16 * 16;
  s.vscales = s.kscales + int(tile * kg * 2 + 15) / 16 * 16;
  s.stage = s.vscales + int(tile * vg * 2 + 15) / 16 * 16;
  const size_t accs = size_t(kAttnWarps) * (g8 ? 8 : 4) * size_t(d) * sizeof(float);
  r.smem = std::max(size_t(kPipeStages) * size_t(s.stage), accs);
  return r;
}

}  // namespace

int PipedSplitBlocksPerSm(const DevCompressedKv& kv, const DevAttention& p) {
  const Piped c = Choose(kv, p);
  return c.kernel ? PipeOccupancy(c.kernel, c.smem) : 0;
}

void LaunchPipedSplit(const float* qp, int64_t n, int64_t pos0, const DevCompressedKv& kv,
                      const DevAttention& p, int splits, int64_t chunk, float* part,
                      cudaStream_t s) {
  const Piped c = Choose(kv, p);
  const dim3 grid(unsigned(n), unsigned(p.num_kv_heads), unsigned(splits));
  TQ_LAUNCH_SMEM(c.kernel, grid, kPipeThreads, c.smem, s, qp, pos0, kv, p, chunk, c.shape, part);
}

}  // namespace tq::kernels::cuda
