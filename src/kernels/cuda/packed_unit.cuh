// One 32-code unit of a packed row (quant/packing.h: q2 8 bytes, q3 12, q4 16, q8 32) loaded
// with the widest aligned loads, and its codes read from the loaded words (code_at.h's layout;
// the index is a compile-time constant once the caller's loop is unrolled). For the matvec
// (matvec.cu) and the tensor-core GEMM's weight tiles (matmul.cu).
#pragma once

#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {

// Bytes of one 32-code unit (quant/packing.h).
template <int F>
inline constexpr int kUnitBytes = F == kQ2   ? 8
                                  : F == kQ3 ? 12
                                  : F == kQ4 ? 16
                                             : 32;

template <int F>
struct Unit {
  uint32_t w[kUnitBytes<F> / 4];
};

template <int F>
__device__ __forceinline__ Unit<F> LoadUnit(const uint8_t* p) {
  Unit<F> u;
  if constexpr (F == kQ4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    u.w[0] = v.x, u.w[1] = v.y, u.w[2] = v.z, u.w[3] = v.w;
  } else if constexpr (F == kQ8) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
    const uint4 b = __ldg(reinterpret_cast<const uint4*>(p) + 1);
    u.w[0] = a.x, u.w[1] = a.y, u.w[2] = a.z, u.w[3] = a.w;
    u.w[4] = b.x, u.w[5] = b.y, u.w[6] = b.z, u.w[7] = b.w;
  } else if constexpr (F == kQ2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    u.w[0] = v.x, u.w[1] = v.y;
  } else {  // q3: 12 bytes, 4-byte aligned
    const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
    u.w[0] = __ldg(q), u.w[1] = __ldg(q + 1), u.w[2] = __ldg(q + 2);
  }
  return u;
}

// LoadUnit for weights read once a product (the one-token tensor-core matvec): the same words,
// loaded without allocating in L1 (`ld.global.nc.L1::no_allocate`), whose data path the kernel's
// shared-memory lookups share; q4, q8 and q2 (q3 loads as LoadUnit).
#if !defined(TQ_CUDA_EMU)
// kW (2 or 4) words at p (aligned to their size) into w[0..kW).
template <int kW>
__device__ __forceinline__ void LdNoAllocate(uint32_t* w, const uint8_t* p) {
  if constexpr (kW == 4) {
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
        : "l"(p));
  } else {
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
  }
}
#endif
template <int F>
__device__ __forceinline__ Unit<F> LoadUnitStream(const uint8_t* p) {
#if defined(TQ_CUDA_EMU)
  return LoadUnit<F>(p);
#else
  if constexpr (F == kQ3) {
    return LoadUnit<F>(p);
  } else {
    Unit<F> u;
    constexpr int kW = F == kQ2 ? 2 : 4, kWords = kUnitBytes<F> / 4;
#pragma unroll
    for (int i = 0; i < kWords; i += kW) LdNoAllocate<kW>(u.w + i, p + 4 * i);
    return u;
  }
#endif
}

// Code j (0..31) of a unit, code_at.h's layout read from the loaded words.
template <int F>
__device__ __forceinline__ int UnitCode(const Unit<F>& u, int j) {
  auto byte = [&](int i) { return int((u.w[i >> 2] >> (8 * (i & 3))) & 255u); };
  if constexpr (F == kQ4) {
    return (byte(j & 15) >> (4 * (j >> 4))) & 15;
  } else if constexpr (F == kQ2) {
    return (byte(j & 7) >> (2 * (j >> 3))) & 3;
  } else if constexpr (F == kQ3) {
    return ((byte(j & 7) >> (2 * (j >> 3))) & 3) | ((byte(8 + (j >> 3)) >> (j & 7)) & 1) << 2;
  } else {
    return byte(j);
  }
}

// book[code j] of a unit for the codebook kernels. The generic form decodes the code (a shift
// and a mask of the loaded word) and indexes; for q4 the unit's words are first turned into byte
// offsets into the table, four codes per word at once ((w << 2) & 0x3C3C3C3C: the low nibbles
// times 4, codes 4k..4k+3; (w >> 2) & 0x3C3C3C3C: the high nibbles, codes 16+4k..), so each
// lookup is a byte extract and a shared-memory load: 1.25 integer operations a code instead of
// ~2.75 (the 4-bit matvec is bound by its instruction issue, not by DRAM).
template <int F>
struct BookIndex {
  Unit<F> u;
  __device__ __forceinline__ explicit BookIndex(const Unit<F>& x) : u(x) {}
  __device__ __forceinline__ float operator()(const float* book, int j) const {
    return book[UnitCode<F>(u, j)];
  }
};
template <>
struct BookIndex<kQ4> {
  uint32_t off[8];  // [k]: codes 4k..4k+3 (low nibbles) × 4; [4 + k]: codes 16+4k.. (high)
  __device__ __forceinline__ explicit BookIndex(const Unit<kQ4>& x) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      off[k] = (x.w[k] << 2) & 0x3C3C3C3Cu;
      off[4 + k] = (x.w[k] >> 2) & 0x3C3C3C3Cu;
    }
  }
  __device__ __forceinline__ float operator()(const float* book, int j) const {
    const uint32_t word = off[(j >> 4) * 4 + ((j & 15) >> 2)];
    return *reinterpret_cast<const float*>(reinterpret_cast<const char*>(book) +
                                           ((word >> (8 * (j & 3))) & 0xFFu));
  }
};

// The fast kernels take q2/q3/q4/q8 rows stored unit after unit, cols % 32 == 0, groups a
// multiple of 16 (a unit's halves each have one scale), codes aligned to the unit load.
inline bool UnitLayout(const DevPacked& w) {
  if (w.cols % 32 || w.group_size % 16) return false;
  const int64_t units = w.cols / 32;
  const auto a = reinterpret_cast<uintptr_t>(w.codes);
  switch (w.format) {
    case kQ2:
      return w.row_bytes == units * 8 && a % 8 == 0;
    case kQ3:
      return w.row_bytes == units * 12 && a % 4 == 0;
    case kQ4:
      return w.row_bytes == units * 16 && a % 16 == 0;
    case kQ8:
      return w.row_bytes == units * 32 && a % 16 == 0;
    default:
      return false;
  }
}

}  // namespace tq::kernels::cuda
