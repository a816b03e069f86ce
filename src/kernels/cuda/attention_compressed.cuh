// What the TurboQuant cache's attention kernels share (attention_compressed.cu: the query,
// generic, warp-split and merge kernels; attention_compressed_piped.cu: the pipelined split
// kernel): decoding a coded vector's channels, the level tables, and the pipelined kernel's
// entry points.
#pragma once

#include "kernels/cuda/attention_common.cuh"

namespace tq::kernels::cuda {

// Channel j of a coded vector (codes, fp16 scales) in format f with level tables tab[segment].
__device__ __forceinline__ float CodedAt(const DevCodeFormat& f, const float (*tab)[256],
                                         const uint8_t* codes, const uint16_t* scales, int64_t j) {
  const int s = (f.num_segments == 2 && j >= f.seg[1].begin) ? 1 : 0;
  const DevSegment& seg = f.seg[s];
  const int code = CodeAt(seg.format, codes + seg.byte_offset, j - seg.begin, seg.end - seg.begin);
  return F16(__ldg(scales + j / f.group)) * tab[s][code];
}

// The key and value level tables of both segments into shared memory (all threads; no barrier).
__device__ __forceinline__ void LoadTables(const DevCompressedKv& kv, float (*ktab)[256],
                                           float (*vtab)[256]) {
  for (int s = 0; s < 2; ++s) {
    for (int c = threadIdx.x; c < 256; c += blockDim.x) {
      ktab[s][c] = s < kv.kf.num_segments && c < kv.kf.seg[s].levels ? kv.kf.seg[s].table[c] : 0.0f;
      vtab[s][c] = s < kv.vf.num_segments && c < kv.vf.seg[s].levels ? kv.vf.seg[s].table[c] : 0.0f;
    }
  }
}

// A byte of global memory through the read-only cache, or of shared memory (kShared).
template <bool kShared>
__device__ __forceinline__ unsigned LoadByte(const uint8_t* p) {
  if constexpr (kShared) {
    return *p;
  } else {
    return __ldg(p);
  }
}

// Code of channel 32 e + j (j < 32: the lane) of a row in binary format F, from the 32-code unit
// at `unit` (CodeAt's layout with the format and the unit known at compile time: a byte load, a
// shift and a mask; q3 two loads). kShared: the unit is in shared memory.
template <int F, bool kShared = false>
__device__ __forceinline__ int UnitCode(const uint8_t* __restrict__ unit, int j) {
  if constexpr (F == kQ2) {
    return (LoadByte<kShared>(unit + (j & 7)) >> (2 * (j >> 3))) & 3;
  } else if constexpr (F == kQ3) {
    return ((LoadByte<kShared>(unit + (j & 7)) >> (2 * (j >> 3))) & 3) |
           (((LoadByte<kShared>(unit + 8 + (j >> 3)) >> (j & 7)) & 1) << 2);
  } else if constexpr (F == kQ4) {
    return (LoadByte<kShared>(unit + (j & 15)) >> (4 * (j >> 4))) & 15;
  } else {
    static_assert(F == kQ8, "UnitCode: q2, q3, q4 or q8");
    return LoadByte<kShared>(unit + j);
  }
}
constexpr int kAnyFormat = -1;  // CompressedSplitKernel's run-time path (CodedAt)

// This lane's channels lane + 32 e (e < kP) of one coded vector: level × group scale. F a format:
// one segment, groups of a multiple of 32 channels (gi[e] the group of channel 32 e); kAnyFormat:
// CodedAt (any segments and groups). No branch: the caller's loads of several vectors stay in one
// basic block, so they are all in flight before the first is used. kShared: codes and scales in
// shared memory (fast formats only).
template <int kP, int F, bool kShared = false>
__device__ __forceinline__ void DecodeLane(const DevCodeFormat& f, const float (*tab)[256],
                                           const uint8_t* codes, const uint16_t* scales,
                                           const int* gi, int lane, float* out) {
  if constexpr (F == kAnyFormat) {
    static_assert(!kShared, "DecodeLane: the run-time decoder reads global memory");
#pragma unroll
    for (int e = 0; e < kP; ++e) out[e] = CodedAt(f, tab, codes, scales, lane + 32 * e);
  } else {
    auto scale = [&](int g) { return F16(kShared ? scales[g] : __ldg(scales + g)); };
    const float s0 = scale(0);
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      const float sc = gi[e] == 0 ? s0 : scale(gi[e]);
      out[e] = sc * tab[0][UnitCode<F, kShared>(codes + e * UnitBytes(F), lane)];
    }
  }
}

// --- attention_compressed_piped.cu: the split kernel fed by a cp.async pipeline ---
// Taken for one code segment a side, groups of a multiple of 32 channels, q2/q3/q4/q8 keys and
// q2/q3/q4 values, no QJL sketch, head_dim 64/128/256, at most 8 query heads a KV head, code rows
// of a multiple of 4 bytes (every K·V preset of the cache). TURBOQUANT_CUDA_KV_SPLIT=warp keeps
// the warp-split kernel of attention_compressed.cu (read at each launch).
// Blocks an SM the pipelined kernel for kv's formats runs (0: not eligible, the other kernels
// run). The split plan targets that many blocks a multiprocessor (one wave).
int PipedSplitBlocksPerSm(const DevCompressedKv& kv, const DevAttention& p);
// part [n, heads, splits, 2 + d] (CompressedMergeKernel's input) from qp (CompressedQueryKernel's
// output) for the plan's splits of `chunk` positions.
void LaunchPipedSplit(const float* qp, int64_t n, int64_t pos0, const DevCompressedKv& kv,
                      const DevAttention& p, int splits, int64_t chunk, float* part,
                      cudaStream_t s);

}  // namespace tq::kernels::cuda
