// The decode step's q4 / q2 products on the tensor cores: y [out] = W x (+ bias) for one token, W
// packed q4 or q2 with a codebook (the default 4- and 2-bit files: g128 / g64, e8 or fp16
// scales; any power-of-two group of at least 32), one matrix or a q/k/v- or gate/up-like group
// over one x; and q8 with convert's linear codebook (the LM head of the default files: level c =
// (c - 128) · step, PackedMatrix::linear_q8_step), whose codes become exact bf16 integers c - 128
// by three integer operations and one bf16x2 add a pair (Q8Pair: no table, so no shared-memory
// lookups), the step applied to each row's sum. Session 19's ncu: the fp32 row kernel took the
// 8B shape's q8 LM head in 307 µs (1.7 TB/s), ~8.5% of a 4-bit decode step.
//
// Why: the fp32 row kernel (matvec.cu) spends ~6 instructions a weight (a code extract, one
// codebook read from shared memory, an FMA, x reads) and is bound by its instruction issue and
// shared-memory waits at ~1 TB/s (ncu, session 11). Here a weight costs ~1.5 instructions:
// - the 16 rows of a warp tile are the A operand of mma.m16n8k16 (bf16 in, fp32 accumulation),
//   x the B operand. The order of the 16 k's of a step is free as long as A and B agree, so lane
//   (g = lane / 4, t = lane % 4) holds the weights of rows g and g + 8 at the codes of ITS OWN
//   loaded unit (32 codes): a chunk of 128 columns is units 0..3, unit t to lane t of each quad,
//   and a unit feeds eight steps;
// - column n < 4 of B is x's hi part on the k's of lane t = n only (zero elsewhere) and column
//   n + 4 its lo part on the same k's, so columns u and u + 4 of the result are the row's dot
//   product with unit u alone: each unit's group scale multiplies its own fp32 sums (groups of
//   32 or more); lanes t = 0, 1 hold the hi sums of units 0..3, lanes t = 2, 3 the lo sums;
// - a byte of codes decodes with ONE shared-memory read: q4 (code j: low nibble, j + 16: high)
//   from a 256-entry table of bf16 pairs {book[v & 15], book[v >> 4]} (two bytes a step), q2
//   (codes j, j + 8, j + 16, j + 24 in 2-bit fields) from a table of two pairs (one byte a
//   step). The table is replicated per lane (entry e of lane l at byte 256 e + 4 l, or + 8 l:
//   every lane its own banks) so the address is one byte permute of the loaded word (byte 1 =
//   the code byte, byte 0 = the lane's offset);
// - x is split into bf16 hi + lo parts (16 significant bits; full fp32 range), both in one mma
//   (session 13's kernel used two, columns 4..7 zero, and each lane read all four words of a
//   step: ncu found the kernel bound by its L1/shared pipe, 78% busy); it is staged once per
//   block in shared memory as the B fragments' pairs, a unit's 32 words padded to 36 (the 8
//   supplying lanes' 8-byte reads of units 0..3 fall in distinct banks; the others read zeros).
// Accuracy: the codebook's levels rounded to bf16 (relative 2^-9, the same for every weight of a
// level: a slightly different codebook), x to ~2^-17; NMSE ~1e-6 against the fp32 kernel.
// TURBOQUANT_CUDA_MATVEC=rows (or TURBOQUANT_CUDA_GEMM=exact) keeps the fp32 kernel.
//
// Work split: blocks of 16 warps, about one per SM; each block owns consecutive 16-row tiles of
// one member (so one table a block) and each warp a contiguous run of the block's (tile, chunk)
// items, the next kDepth items' loads issued before the current kDepth are computed (and the
// first batch's before the block's set-up). Launched as a programmatic dependent of the previous
// kernel (sm_90): the first loads and the tables (nothing an earlier kernel writes) go before
// the wait for that kernel, so they overlap its tail; x is read (and rotated) after it. A warp
// stores its sums of a tile's rows in its own shared-memory slot; the block adds the 16 warps'
// slots of a row in a fixed order (the result does not depend on timing) and writes y.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/packed_unit.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kMmaWarps = 16;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kTileRows = 16;          // rows of a warp tile (the mma's M)
constexpr int kChunkCols = 128;        // columns of an item: 4 units, one per lane of a quad
constexpr int kXUnitWords = 36;        // staged x: 8 steps × {hi b0, hi b1, lo b0, lo b1}
constexpr int kTableWords = 256 * 64;  // the code-byte table (entry e: bytes 256 e ..)
constexpr int kMaxTilesPerBlock = 64;  // the block's partial sums: 1 KiB a tile
// Items a warp computes per batch (two batches in flight): a q8 item is twice a q4 one's bytes.
template <int F>
inline constexpr int kDepth = F == kQ8 ? 2 : 3;
constexpr int kMaxMmaGroup = 4;
// The widest x rotated inside the kernel: every block rotates all of x in shared memory (its own
// region, before the code-byte table) after the wait for the previous kernel. Session 12's
// version (radix-8 passes in shared memory with 8- and 4-way bank conflicts in the first two, in
// the table's space so before the table was built) cost each launch ~4-5 µs at 4,096 columns and
// ~18 µs at 14,336 (ncu, 8B decode step); the stages below 256 now run in registers and warp
// shuffles (SharedFwht) and the table is built before the wait. Wider x (or x whose region does
// not fit beside the rest) is rotated by the separate kernel first.
constexpr int64_t kMaxFusedRotationCols = 16384;
constexpr size_t kMaxMmaSmem = 220 * 1024;  // of the H200's 227 KiB a block

struct DevMmaGroup {
  DevPacked w[kMaxMmaGroup];
  const float* bias[kMaxMmaGroup] = {};
  float* y[kMaxMmaGroup] = {};
  int block0[kMaxMmaGroup + 1] = {};  // member m's blocks: [block0[m], block0[m + 1])
  int count = 0;
  int tiles_per_block = 1;
};

// Two floats as a bf16 pair (lo in the low half), rounded to nearest even.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  return uint32_t(Bf16Bits(lo)) | uint32_t(Bf16Bits(hi)) << 16;
}

// c[4] += A (16x16 bf16, row) · B (16x8 bf16, col), fp32 accumulation. Fragments (g = lane / 4,
// t = lane % 4; a register holds two elements, the lower column / k in its low half):
// a = {A[g][2t..], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]}, b = {B[2t..][g], B[2t+8..][g]},
// c = {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]}.
__device__ __forceinline__ void MmaBf16(float (&c)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
#if defined(TQ_CUDA_EMU)
  ::tq::emu::WarpMmaBf16(c, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Where the block's dynamic shared memory holds what (byte offsets), chosen by the host:
// the code-byte table starts at a shared-window address whose low 16 bits are zero (dynamic
// shared memory starts after the `reserved` bytes the driver keeps, so at offset 0x10000 -
// reserved), which lets one byte permute build a lookup's whole address (ByteAddr); the rest
// goes before it when it fits, else after it.
struct MmaLayout {
  int table = 0;  // 64 KiB
  int rot = 0;    // the rotated x: cols floats (when the kernel rotates)
  int w = 0;      // DevPacked + the member index (128 bytes)
  int e8 = 0;     // the e8 scale table: 256 floats
  int zeros = 0;  // 32 zero words
  int red = 0;    // partial sums [tiles_per_block][16 warps][16]
  int xs = 0;     // staged x [units][36 words]
  int total = 0;
};

// This lane's shared-memory address of code byte k (0..3) of `word`: `hi` holds the table's
// address in its upper 16 bits and the lane's offset in its low byte, so the result is
// {hi byte 0, the code byte, hi bytes 2 and 3} = table + 256 · code + lane offset.
__device__ __forceinline__ uint32_t ByteAddr(uint32_t word, uint32_t hi, int k) {
  return __byte_perm(word, hi, 0x7604u | uint32_t(k) << 4);
}

// Loads from a 32-bit shared-window address (the emulator: its dynamic buffer, laid out from
// address kEmuReserved as a device lays it out after the reserved bytes).
#if defined(TQ_CUDA_EMU)
constexpr uint32_t kEmuReserved = 1024;
inline uint32_t SharedAddr(const void* p) {
  return uint32_t(static_cast<const char*>(p) - reinterpret_cast<const char*>(DynamicShared())) +
         kEmuReserved;
}
inline const char* FromShared(uint32_t a) {
  return reinterpret_cast<const char*>(DynamicShared()) + (a - kEmuReserved);
}
inline uint32_t LdShared32(uint32_t a) { return *reinterpret_cast<const uint32_t*>(FromShared(a)); }
inline uint2 LdShared64(uint32_t a) { return *reinterpret_cast<const uint2*>(FromShared(a)); }
#else
__device__ __forceinline__ uint32_t SharedAddr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t LdShared32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 LdShared64(uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
#endif

// Codes 2k, 2k + 1 (k = 0, 1) of `word` as the bf16 pair {c - 128, c' - 128}, exactly (integers
// of magnitude <= 128): bytes spread to 16-bit fields, the low 7 bits m put under bf16 128's
// exponent (128 + m, whose unit in the last place is 1) and 128 or 256 taken off as bit 7 says.
__device__ __forceinline__ uint32_t Q8Pair(uint32_t word, int k) {
  const uint32_t t = __byte_perm(word, 0u, k ? 0x4342u : 0x4140u);  // {c, 0, c', 0}
  const uint32_t m = (t & 0x007F007Fu) | 0x43004300u;               // 128 + m
  const uint32_t off = (~t & 0x00800080u) | 0xC300C300u;            // -128 (bit 7 set) or -256
#if defined(TQ_CUDA_EMU)
  const float lo = Bf16(uint16_t(m)) + Bf16(uint16_t(off));
  const float hi = Bf16(uint16_t(m >> 16)) + Bf16(uint16_t(off >> 16));
  return uint32_t(Bf16Bits(lo)) | uint32_t(Bf16Bits(hi)) << 16;
#else
  uint32_t r;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(m), "r"(off));
  return r;
#endif
}

// Bits 0..3 of n (< 16) to bit 0 of bytes 0..3 (the four shifted copies of n never overlap,
// so the product has no carries).
__device__ __forceinline__ uint32_t SpreadNibble(uint32_t n) {
  return (n * 0x00204081u) & 0x01010101u;
}

// A unit's codes as the steps read them: the loaded words (q2, q4, q8), or for q3 four words of
// code-pair table indices, built once an item from its 12 bytes. q3's layout (quant/packing.h):
// bytes 0..7 hold the low 2 bits of codes i, i + 8, i + 16, i + 24 in byte i (i < 8), bytes
// 8..11 the high bit of code j at bit j % 8 of byte 8 + j / 8. Index byte b of word w pairs
// codes (c0, c1) = PairCols<kQ3>(4w + b) as lo2(c0) | lo2(c1) << 2 | hi(c0) << 4 | hi(c1) << 5.
template <int F>
struct StepCodes {
  Unit<F> q[2];
};
template <>
struct StepCodes<kQ3> {
  uint32_t iw[2][4];
};
template <int F>
__device__ __forceinline__ StepCodes<F> PrepareCodes(const Unit<F> (&q)[2]) {
  if constexpr (F == kQ3) {
    StepCodes<kQ3> c;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t hb = q[h].w[2];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int half = w & 1, upper = w >> 1;  // codes 4 half + b (+ 16 upper), + 8
        const uint32_t lo = (q[h].w[half] >> (4 * upper)) & 0x0F0F0F0Fu;
        const int sh = 16 * upper + 4 * half;
        c.iw[h][w] =
            lo | SpreadNibble((hb >> sh) & 15u) << 4 | SpreadNibble((hb >> (sh + 8)) & 15u) << 5;
      }
    }
    return c;
  } else {
    return StepCodes<F>{{q[0], q[1]}};
  }
}

// The A fragment of step s (0..7) from this lane's units of rows g (q[0]) and g + 8 (q[1]):
// q4: bytes 2s (k 2t, 2t + 1) and 2s + 1 (k 2t + 8, ..) of each row, one pair each;
// q3: the same bytes of the index words (PrepareCodes);
// q2: byte s of each row, whose entry is both pairs;
// q8 (linear codebook): word s of each row, codes 4s, 4s + 1 (k 2t, ..) and 4s + 2, 4s + 3
// (k 2t + 8, ..) as c - 128 (Q8Pair; no table).
template <int F>
__device__ __forceinline__ void StepA(uint32_t (&a)[4], const StepCodes<F>& c, uint32_t hi, int s) {
  if constexpr (F == kQ8) {
    a[0] = Q8Pair(c.q[0].w[s], 0);
    a[1] = Q8Pair(c.q[1].w[s], 0);
    a[2] = Q8Pair(c.q[0].w[s], 1);
    a[3] = Q8Pair(c.q[1].w[s], 1);
  } else if constexpr (F == kQ4 || F == kQ3) {
    const int word = s >> 1, k0 = (2 * s) & 3;
    uint32_t w0, w1;
    if constexpr (F == kQ3) {
      w0 = c.iw[0][word], w1 = c.iw[1][word];
    } else {
      w0 = c.q[0].w[word], w1 = c.q[1].w[word];
    }
    a[0] = LdShared32(ByteAddr(w0, hi, k0));
    a[1] = LdShared32(ByteAddr(w1, hi, k0));
    a[2] = LdShared32(ByteAddr(w0, hi, k0 + 1));
    a[3] = LdShared32(ByteAddr(w1, hi, k0 + 1));
  } else {
    const uint2 e0 = LdShared64(ByteAddr(c.q[0].w[s >> 2], hi, s & 3));
    const uint2 e1 = LdShared64(ByteAddr(c.q[1].w[s >> 2], hi, s & 3));
    a[0] = e0.x, a[2] = e0.y, a[1] = e1.x, a[3] = e1.y;
  }
}

// Table entry e of a format: q4 the pair {book[e & 15], book[e >> 4]}; q3 the pair {book[(e &
// 3) | (e >> 2 & 4)], book[(e >> 2 & 3) | (e >> 3 & 4)]} (PrepareCodes' index); q2 the pairs
// {book[e & 3], book[(e >> 2) & 3]} and {book[(e >> 4) & 3], book[e >> 6]}; one copy a lane.
template <int F>
inline constexpr int kLaneBytes = F == kQ2 ? 8 : 4;

// Pair p (0..15) of a unit's staged x: the two columns (within the unit) it multiplies, in the
// A fragment's order: step p / 2, register p % 2.
template <int F>
__device__ __forceinline__ void PairCols(int p, int& c0, int& c1) {
  if constexpr (F == kQ8) {
    c0 = 2 * p, c1 = 2 * p + 1;  // word p / 2, codes 4 (p / 2) + 2 (p % 2) ..
  } else if constexpr (F == kQ4) {
    c0 = p, c1 = p + 16;  // byte p: codes p, p + 16
  } else if constexpr (F == kQ3) {
    const int i = 4 * ((p >> 2) & 1) + (p & 3);  // index word p / 4, byte p % 4
    c0 = i + 16 * (p >> 3), c1 = c0 + 8;
  } else {
    const int s = p >> 1;
    c0 = s + 16 * (p & 1), c1 = c0 + 8;  // byte s: codes s, s + 8 | s + 16, s + 24
  }
}

// buf[0..n) <- H_b diag(signs) x blockwise (b = 1 << bshift), unscaled (SharedFwht's stages, the
// same results); ends with a barrier. x is read 8 elements a lane (two 16-byte loads and the
// signs' 8 bytes), kRotBatch chunks' loads issued before the first is used: the reads of x are
// on the kernel's critical path (after the wait for the previous kernel), and one dependent load
// after another cost ~4 µs at 14,336 columns.
constexpr int kRotBatch = 2;
__device__ __forceinline__ void SharedRotate(float* buf, const float* __restrict__ x,
                                             const int8_t* __restrict__ signs, int n, int bshift) {
  if (!FwhtWarpable(n, bshift) || (reinterpret_cast<uintptr_t>(x) & 15) ||
      (reinterpret_cast<uintptr_t>(signs) & 7)) {
    for (int i = threadIdx.x; i < n; i += blockDim.x)
      buf[i] = __ldg(x + i) * float(__ldg(signs + i));
    SharedFwht(buf, n, 1 << bshift);
    return;
  }
  const int chunks = n / 8;
  for (int c0 = threadIdx.x; c0 < chunks; c0 += kRotBatch * blockDim.x) {
    float v[kRotBatch][8];
#pragma unroll
    for (int k = 0; k < kRotBatch; ++k) {
      const int c = c0 + k * int(blockDim.x);
      if (c >= chunks) break;
      const float4 lo = __ldg(reinterpret_cast<const float4*>(x) + 2 * c);
      const float4 hi = __ldg(reinterpret_cast<const float4*>(x) + 2 * c + 1);
      const uint2 sg = __ldg(reinterpret_cast<const uint2*>(signs) + c);
      const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[k][j] = f[j] * float(int8_t(((j < 4 ? sg.x : sg.y) >> (8 * (j & 3))) & 0xFFu));
    }
#pragma unroll
    for (int k = 0; k < kRotBatch; ++k) {
      const int c = c0 + k * int(blockDim.x);
      if (c >= chunks) break;  // the same for all lanes of a warp (FwhtWarpable)
      FwhtWarpStages(v[k], bshift);
      float4* p = reinterpret_cast<float4*>(buf + 8 * c);
      p[0] = float4{v[k][0], v[k][1], v[k][2], v[k][3]};
      p[1] = float4{v[k][4], v[k][5], v[k][6], v[k][7]};
    }
  }
  FwhtPasses(buf, n, bshift, bshift < 8 ? bshift : 8);
}

// x staged for the B fragments: kStageBatch pairs a thread, their loads issued first.
constexpr int kStageBatch = 4;

// One item's codes (rows g and g + 8 of the tile, this lane's unit of the chunk), the raw scales
// of this lane's two result columns (units u0, u0 + 1 of rows g and g + 8: e8 codes or fp16
// bits, unit u0 in the low half; decoded only when used, so that no instruction waits on them
// while the next items load), and where it is: tl << 16 | chunk, or -1 for none.
template <int F>
struct Item {
  Unit<F> q[2];
  uint32_t s[2];
  int at;
};

template <int F, bool kE8>
__global__ void __launch_bounds__(kMmaThreads, 1)
    PackedMatVecMmaKernel(const float* __restrict__ x, DevMmaGroup grp, int gshift, MmaLayout lay,
                          DevRotation rot, int bshift) {
  char* smem = reinterpret_cast<char*>(DynamicShared());
  DevPacked& w = *reinterpret_cast<DevPacked*>(smem + lay.w);
  int& member = *reinterpret_cast<int*>(smem + lay.w + sizeof(DevPacked));
  if (threadIdx.x == 0) {
    int m = 0;
    while (m + 1 < grp.count && int(blockIdx.x) >= grp.block0[m + 1]) ++m;
    member = m;
#pragma unroll
    for (int i = 0; i < kMaxMmaGroup; ++i)
      if (i == m) w = grp.w[i];
  }
  __syncthreads();
  const int m = member;
  const int units = int(w.cols / 32), chunks = units / 4;
  const int64_t tiles = (w.rows + kTileRows - 1) / kTileRows;
  const int64_t tile0 = int64_t(int(blockIdx.x) - grp.block0[m]) * grp.tiles_per_block;
  const int ntiles = int(tile0 + grp.tiles_per_block < tiles ? grp.tiles_per_block : tiles - tile0);

  uint32_t* table = reinterpret_cast<uint32_t*>(smem + lay.table);
  uint32_t* xs = reinterpret_cast<uint32_t*>(smem + lay.xs);
  uint32_t* zeros = reinterpret_cast<uint32_t*>(smem + lay.zeros);
  float* e8 = reinterpret_cast<float*>(smem + lay.e8);
  float* red = reinterpret_cast<float*>(smem + lay.red);  // [tile][warp][16]
  const uint32_t tsh = SharedAddr(table);
  if (tsh & 0xFFFFu) __trap();  // the layout's premise (checked by the host's probe) broke

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  // This warp's items: a contiguous run [ibeg, iend) of the block's ntiles × chunks, tile-major
  // (the chunks of one tile, or the end of one and the start of the next), walked by a cursor:
  // row pointers are set once a tile, then a chunk is an offset.
  const int items = ntiles * chunks;
  const int ibeg = int(int64_t(items) * warp / kMmaWarps);
  const int iend = int(int64_t(items) * (warp + 1) / kMmaWarps);
  int left = iend - ibeg;      // items still to load
  const int u0 = 2 * (t & 1);  // the first unit of this lane's result columns
  int ltl = ibeg / chunks, lc = ibeg - ltl * chunks;
  using RawScale = std::conditional_t<kE8, uint8_t, uint16_t>;  // e8 code or fp16 bits
  const uint8_t* lp[2];
  const RawScale* ls[2];  // the row's first scale
  auto enter = [&](int tl) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t r = (tile0 + tl) * kTileRows + g + 8 * h;
      if (r >= w.rows) r = w.rows - 1;
      lp[h] = w.codes + r * w.row_bytes + t * kUnitBytes<F>;
      const int64_t g0 = r * (w.cols >> gshift);
      if constexpr (kE8) {
        ls[h] = w.scale_codes + g0;
      } else {
        ls[h] = w.scales + g0;
      }
    }
  };
  enter(ltl);
  constexpr int kD = kDepth<F>;
  auto load = [&](Item<F>(&it)[kD]) {
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      it[d].at = -1;
      if (left <= 0) continue;
      const int col = lc * kChunkCols + u0 * 32;
      const int ga = col >> gshift, gb = (col + 32) >> gshift;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        it[d].q[h] = LoadUnitStream<F>(lp[h] + lc * (4 * kUnitBytes<F>));
        it[d].s[h] = uint32_t(__ldg(ls[h] + ga)) | uint32_t(__ldg(ls[h] + gb)) << 16;
      }
      it[d].at = ltl << 16 | lc;
      --left;
      if (++lc == chunks) {
        lc = 0;
        if (left > 0) enter(++ltl);
      }
    }
  };
  // The first items' loads go out before the set-up below, which then overlaps their latency.
  Item<F> cur[kD], nxt[kD];
  load(cur);

  // What depends on no earlier kernel (launched with PDL, this overlaps the previous kernel's
  // tail): the e8 scale table, zeroed partial sums and the code-byte table (not for q8).
  if (kE8 && threadIdx.x < 256) e8[threadIdx.x] = __ldg(w.scale_table + threadIdx.x);
  if (threadIdx.x < 32) zeros[threadIdx.x] = 0u;
  for (int i = threadIdx.x; i < ntiles * kMmaWarps * kTileRows; i += kMmaThreads) red[i] = 0.0f;
  constexpr int kLaneWords = kLaneBytes<F> / 4;
  const float* __restrict__ book = w.codebook;  // read once from the staged DevPacked
#pragma unroll 4
  for (int i = threadIdx.x; i < (F == kQ8 ? 0 : 256 * 32); i += kMmaThreads) {
    const int e = i >> 5, l = i & 31;
    uint32_t* dst = table + e * 64 + l * kLaneWords;
    if constexpr (F == kQ4) {
      dst[0] = PackBf16(__ldg(book + (e & 15)), __ldg(book + (e >> 4)));
    } else if constexpr (F == kQ3) {
      dst[0] = PackBf16(__ldg(book + ((e & 3) | (e >> 2 & 4))),
                        __ldg(book + ((e >> 2 & 3) | (e >> 3 & 4))));
    } else {
      dst[0] = PackBf16(__ldg(book + (e & 3)), __ldg(book + ((e >> 2) & 3)));
      dst[1] = PackBf16(__ldg(book + ((e >> 4) & 3)), __ldg(book + (e >> 6)));
    }
  }
  // x is the previous kernel's output (and y may be its input): wait for it, then x (rotated
  // first when asked) staged as bf16 hi + lo pairs.
  GridDependencyWait();
  const float* xsrc = x;
  float xscale = 1.0f;
  if (rot.signs) {
    float* buf = reinterpret_cast<float*>(smem + lay.rot);
    SharedRotate(buf, x, rot.signs, units * 32, bshift);
    xsrc = buf;
    xscale = rsqrtf(float(1 << bshift));
  }
  const int pairs = units * 16;
  for (int p0 = threadIdx.x; p0 < pairs; p0 += kStageBatch * kMmaThreads) {
    float x0[kStageBatch], x1[kStageBatch];
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
      const int p = p0 + k * kMmaThreads;
      if (p >= pairs) break;
      int c0, c1;
      PairCols<F>(p & 15, c0, c1);
      x0[k] = xsrc[(p >> 4) * 32 + c0];
      x1[k] = xsrc[(p >> 4) * 32 + c1];
    }
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
      const int p = p0 + k * kMmaThreads;
      if (p >= pairs) break;
      const int u = p >> 4, q = p & 15;
      const float a = x0[k] * xscale, b = x1[k] * xscale;
      const uint32_t xh = PackBf16(a, b);
      const float h0 = Bf16(uint16_t(xh & 0xFFFFu)), h1 = Bf16(uint16_t(xh >> 16));
      uint32_t* dst = xs + u * kXUnitWords + (q >> 1) * 4 + (q & 1);
      dst[0] = xh;
      dst[2] = PackBf16(a - h0, b - h1);
    }
  }
  __syncthreads();

  const uint32_t hi = (tsh & 0xFFFF0000u) | uint32_t(lane) * kLaneBytes<F>;
  auto scale = [&](uint32_t raw) {
    if constexpr (kE8) {
      return e8[raw & 0xFFu];
    } else {
      return F16(uint16_t(raw));
    }
  };
  // Rows g and g + 8 of tile `atl`, this lane's two units (hi or lo part) summed over this
  // warp's chunks of the tile; the quad's four lanes add theirs and lane t = 0 stores once a tile
  // (a warp's chunks of a tile are consecutive).
  float acc[2] = {0.0f, 0.0f};
  int atl = ibeg / chunks;
  const bool xl = (g & 3) == t;  // this lane supplies B column g
  auto flush = [&] {
    float r0 = acc[0] + __shfl_xor_sync(0xffffffffu, acc[0], 1);
    float r1 = acc[1] + __shfl_xor_sync(0xffffffffu, acc[1], 1);
    r0 += __shfl_xor_sync(0xffffffffu, r0, 2);
    r1 += __shfl_xor_sync(0xffffffffu, r1, 2);
    if (t == 0) {
      float* slot = red + (atl * kMmaWarps + warp) * kTileRows;
      slot[g] = r0;
      slot[g + 8] = r1;
    }
    acc[0] = acc[1] = 0.0f;
  };
  while (cur[0].at >= 0) {
    load(nxt);  // in flight while this batch computes
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      if (cur[d].at < 0) break;
      const int tl = cur[d].at >> 16, c = cur[d].at & 0xFFFF;
      if (tl != atl) {
        flush();
        atl = tl;
      }
      // B: column g is this lane's unit's x (hi part for g < 4, lo part for g >= 4) when the
      // lane supplies it (g % 4 == t), else zeros.
      const uint32_t* xu = xl ? xs + (c * 4 + t) * kXUnitWords + 2 * (g >> 2) : zeros;
      float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const StepCodes<F> codes = PrepareCodes<F>(cur[d].q);
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        uint32_t a[4];
        StepA<F>(a, codes, hi, s);
        const uint2 xv = *reinterpret_cast<const uint2*>(xu + s * 4);
        const uint32_t b[2] = {xv.x, xv.y};
        MmaBf16(cc, a, b);
      }
      // Columns 2t, 2t + 1 = units u0, u0 + 1: their hi parts on lanes t = 0, 1, their lo parts
      // on lanes t = 2, 3 (the same units, so the same scales).
      const uint32_t s0 = cur[d].s[0], s1 = cur[d].s[1];
      acc[0] += scale(s0 & 0xFFFFu) * cc[0] + scale(s0 >> 16) * cc[1];
      acc[1] += scale(s1 & 0xFFFFu) * cc[2] + scale(s1 >> 16) * cc[3];
    }
#pragma unroll
    for (int d = 0; d < kD; ++d) cur[d] = nxt[d];
  }
  // Every lane takes part in the flush's shuffles (the warp's run is the same for all lanes).
  if (iend > ibeg) flush();
  __syncthreads();
  const float* bias = grp.bias[0];
  float* y = grp.y[0];
#pragma unroll
  for (int i = 1; i < kMaxMmaGroup; ++i)
    if (i == m) bias = grp.bias[i], y = grp.y[i];
  for (int i = threadIdx.x; i < ntiles * kTileRows; i += kMmaThreads) {
    const int tl = i / kTileRows, row = i % kTileRows;
    const int64_t r = (tile0 + tl) * kTileRows + row;
    if (r >= w.rows) continue;
    float sum = 0.0f;
    for (int v = 0; v < kMmaWarps; ++v) sum += red[(tl * kMmaWarps + v) * kTileRows + row];
    if constexpr (F == kQ8) sum *= w.linear_q8_step;  // the sums are of c - 128
    y[r] = sum + (bias ? bias[r] : 0.0f);
  }
}

// An attribute of the current device, or -1 when it cannot be read.
int DeviceAttribute(cudaDeviceAttr a) {
  int dev = 0, v = -1;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return v;
}

// The driver's reserved shared memory per block (1 KiB on sm_80 .. sm_90), or -1 when unknown.
int ReservedSmem() {
  static const int n = DeviceAttribute(cudaDevAttrReservedSharedMemoryPerBlock);
  return n;
}

// Writes the shared-window address of the first byte of dynamic shared memory.
__global__ void SharedBaseProbeKernel(uint32_t* out) { *out = SharedAddr(DynamicShared()); }

// Whether dynamic shared memory starts right after the reserved bytes (the layout's premise),
// asked of the device once (a one-thread kernel and a copy back); false: the row kernel runs.
bool SharedBaseKnown(int reserved) {
  static const bool ok = [reserved] {
    uint32_t* d = nullptr;
    uint32_t v = ~0u;
    if (cudaMalloc(&d, sizeof(uint32_t)) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    TQ_LAUNCH_SMEM(SharedBaseProbeKernel, 1, 1, 16, nullptr, d);
    const bool copied = cudaMemcpy(&v, d, sizeof(v), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
    cudaGetLastError();
    return copied && v == uint32_t(reserved);
  }();
  return ok;
}

// The layout for `cols` columns and `tiles_per_block` tiles (`rotate`: with the rotated x's
// region); total 0 when it cannot be made. The rotated x goes first (before the table when it
// fits there), then the small parts, each run before the table when it fits, else after it.
MmaLayout MakeLayout(int64_t cols, int tiles_per_block, bool rotate) {
  MmaLayout l;
  const int reserved = ReservedSmem();
  if (reserved < 0 || reserved > 0x8000 || reserved % 16 || !SharedBaseKnown(reserved)) return l;
  l.table = 0x10000 - reserved;
  int64_t before = 0, after = l.table + int64_t(kTableWords) * 4;  // the next free byte of each
  auto place = [&](int64_t bytes) {
    int64_t& at = before + bytes <= l.table ? before : after;
    const int64_t o = at;
    at += (bytes + 15) / 16 * 16;
    return o;
  };
  if (rotate) l.rot = int(place(cols * 4));
  const int64_t red = int64_t(tiles_per_block) * kMmaWarps * kTileRows * 4;
  const int64_t o = place(128 + 1024 + 128 + red + (cols / 32) * kXUnitWords * 4);
  l.w = int(o);
  l.e8 = l.w + 128;
  l.zeros = l.e8 + 1024;
  l.red = l.zeros + 128;
  l.xs = l.red + int(red);
  l.total = after <= int64_t(kMaxMmaSmem) ? int(after) : 0;
  return l;
}

// Whether the products launch as programmatic dependents of the previous kernel (sm_90 and
// later; TURBOQUANT_CUDA_PDL=0 turns it off for measurements). Read once.
bool UsePdl() {
#if defined(TQ_CUDA_EMU)
  return false;  // the emulator runs kernels one after another either way
#else
  static const bool on = [] {
    const char* v = std::getenv("TURBOQUANT_CUDA_PDL");
    return !(v && std::strcmp(v, "0") == 0) &&
           DeviceAttribute(cudaDevAttrComputeCapabilityMajor) >= 9;
  }();
  return on;
#endif
}

int SmCount() {
  static const int n = std::max(1, DeviceAttribute(cudaDevAttrMultiProcessorCount));
  return n;
}

bool MmaEligible(const DevPacked& w, const DevPacked& w0) {
  const bool format = w.format == kQ4   ? w.levels == 16
                      : w.format == kQ3 ? w.levels == 8
                      : w.format == kQ2 ? w.levels == 4
                      : w.format == kQ8 ? w.levels == 256 && w.linear_q8_step > 0.0f
                                        : false;
  return format && !w.affine && w.rows > 0 && UnitLayout(w) && w.cols % kChunkCols == 0 &&
         w.group_size >= 32 && (w.group_size & (w.group_size - 1)) == 0 &&
         w.cols < (int64_t(1) << 30) && w.format == w0.format && w.cols == w0.cols &&
         w.group_size == w0.group_size && (w.scale_codes != nullptr) == (w0.scale_codes != nullptr);
}

template <int F, bool kE8>
bool LaunchMma(const float* x, const DevMmaGroup& g, int gshift, const MmaLayout& lay,
               const DevRotation& rot, int bshift, cudaStream_t s) {
  auto* kernel = PackedMatVecMmaKernel<F, kE8>;
  static const bool raised =  // once per instantiation
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxMmaSmem)) ==
      cudaSuccess;
  if (!raised) return false;
  const unsigned blocks = unsigned(g.block0[g.count]);
  if (UsePdl())
    TQ_LAUNCH_PDL(kernel, blocks, kMmaThreads, size_t(lay.total), s, x, g, gshift, lay, rot,
                  bshift);
  else
    TQ_LAUNCH_SMEM(kernel, blocks, kMmaThreads, size_t(lay.total), s, x, g, gshift, lay, rot,
                   bshift);
  return true;
}

}  // namespace

MatVecKind MatVecKindFromEnv() {
  const char* v = std::getenv("TURBOQUANT_CUDA_MATVEC");
  if (v && std::strcmp(v, "rows") == 0) return MatVecKind::kRows;
  if (v && std::strcmp(v, "tiles") == 0) return MatVecKind::kTiles;
  if (v && std::strcmp(v, "async") == 0) return MatVecKind::kAsync;
  if (v && std::strcmp(v, "mma") == 0) return MatVecKind::kMma;
  const char* gemm = std::getenv("TURBOQUANT_CUDA_GEMM");
  if (gemm && std::strcmp(gemm, "exact") == 0) return MatVecKind::kRows;  // fp32 class only
  return MatVecKind::kMma;
}

bool MmaPackedMatVec(const float* x, const DevPacked* ws, const float* const* biases,
                     float* const* ys, int count, const DevRotation* rot, cudaStream_t s) {
  if (MatVecKindFromEnv() != MatVecKind::kMma || count < 1 || count > kMaxMmaGroup) return false;
  int64_t tiles = 0;
  for (int i = 0; i < count; ++i) {
    if (!MmaEligible(ws[i], ws[0])) return false;
    tiles += (ws[i].rows + kTileRows - 1) / kTileRows;
  }
  // About one block per SM, at most kMaxTilesPerBlock tiles a block.
  const int64_t target = SmCount();
  int64_t per = (tiles + target - 1) / target;
  if (per > kMaxTilesPerBlock) per = kMaxTilesPerBlock;
  const MmaLayout lay = MakeLayout(ws[0].cols, int(per), rot != nullptr);
  if (lay.total == 0) return false;
  DevMmaGroup g;
  g.count = count;
  g.tiles_per_block = int(per);
  for (int i = 0; i < count; ++i) {
    g.w[i] = ws[i];
    g.bias[i] = biases[i];
    g.y[i] = ys[i];
    const int64_t blocks = ((ws[i].rows + kTileRows - 1) / kTileRows + per - 1) / per;
    if (int64_t(g.block0[i]) + blocks >= (int64_t(1) << 30)) return false;
    g.block0[i + 1] = g.block0[i] + int(blocks);
  }
  const int gshift = CeilLog2(ws[0].group_size);
  // The rotation: power-of-two blocks dividing cols, cols <= kMaxFusedRotationCols.
  DevRotation r;
  int bshift = 0;
  if (rot) {
    if (rot->dim != ws[0].cols || rot->block < 1 || (rot->block & (rot->block - 1)) ||
        ws[0].cols % rot->block || ws[0].cols > kMaxFusedRotationCols)
      return false;
    r = *rot;
    bshift = CeilLog2(rot->block);
  }
  const bool e8 = ws[0].scale_codes != nullptr;
  if (ws[0].format == kQ8)
    return e8 ? LaunchMma<kQ8, true>(x, g, gshift, lay, r, bshift, s)
              : LaunchMma<kQ8, false>(x, g, gshift, lay, r, bshift, s);
  if (ws[0].format == kQ4)
    return e8 ? LaunchMma<kQ4, true>(x, g, gshift, lay, r, bshift, s)
              : LaunchMma<kQ4, false>(x, g, gshift, lay, r, bshift, s);
  if (ws[0].format == kQ3)
    return e8 ? LaunchMma<kQ3, true>(x, g, gshift, lay, r, bshift, s)
              : LaunchMma<kQ3, false>(x, g, gshift, lay, r, bshift, s);
  return e8 ? LaunchMma<kQ2, true>(x, g, gshift, lay, r, bshift, s)
            : LaunchMma<kQ2, false>(x, g, gshift, lay, r, bshift, s);
}

}  // namespace tq::kernels::cuda
