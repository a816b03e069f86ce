// Device helpers shared by the CUDA kernels: element loads (F32/F16/BF16), group scales and
// dequantized packed elements (the code decoder itself is code_at.h), warp reductions and the
// in-shared-memory Walsh–Hadamard transform.
#pragma once

#if !defined(TQ_CUDA_EMU)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cstdint>
#include <cstring>

#include "kernels/cuda/code_at.h"
#include "kernels/cuda/launch.h"

namespace tq::kernels::cuda {

__device__ __forceinline__ float F16(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float Bf16(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
// fp32 -> bf16 bits, rounded to nearest even.
__device__ __forceinline__ uint16_t Bf16Bits(float f) {
#if defined(TQ_CUDA_EMU)
  return tq::F32ToBf16(f);
#else
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#endif
}

template <Elem E>
__device__ __forceinline__ float LoadElem(const void* p, int64_t i) {
  if constexpr (E == Elem::kF32) {
    return __ldg(static_cast<const float*>(p) + i);
  } else if constexpr (E == Elem::kF16) {
    return F16(__ldg(static_cast<const unsigned short*>(p) + i));
  } else {
    return Bf16(__ldg(static_cast<const unsigned short*>(p) + i));
  }
}

__device__ __forceinline__ float LoadElem(const void* p, Elem e, int64_t i) {
  switch (e) {
    case Elem::kF32:
      return LoadElem<Elem::kF32>(p, i);
    case Elem::kF16:
      return LoadElem<Elem::kF16>(p, i);
    default:
      return LoadElem<Elem::kBF16>(p, i);
  }
}

// Group scale i (flat: row · groups + group) of a packed matrix, fp16 or e8.
__device__ __forceinline__ float PackedScale(const DevPacked& w, int64_t i) {
  return w.scale_codes ? __ldg(w.scale_table + __ldg(w.scale_codes + i)) : F16(__ldg(w.scales + i));
}

// Dequantized element (r, c) of a packed matrix; `book` is the codebook (shared memory or global).
__device__ __forceinline__ float PackedAt(const DevPacked& w, const float* book, int64_t r,
                                          int64_t c) {
  const int code = CodeAt(w.format, w.codes + r * w.row_bytes, c, w.cols);
  const int64_t g = r * (w.cols / w.group_size) + c / w.group_size;
  const float scale = PackedScale(w, g);
  // Rounded as the reference rounds it (no fused multiply-add): embeddings are bit-exact.
  if (w.affine) return __fadd_rn(F16(__ldg(w.mins + g)), __fmul_rn(scale, float(code)));
  return scale * book[code];
}

// silu(g) · u as SiluMulKernel computes it (every kernel that applies SwiGLU gets the same bits).
__device__ __forceinline__ float SiluMulOf(float g, float u) { return g / (1.0f + expf(-g)) * u; }

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The block's sum / max of v (every thread gets it; all threads of the block call it); `part` is
// 32 floats of shared memory, reusable right after the call.
__device__ __forceinline__ float BlockSum(float v, float* part) {
  v = WarpSum(v);
  __syncthreads();  // part may still be read by a previous call
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32) t = WarpSum(t);
  if (threadIdx.x == 0) part[0] = t;
  __syncthreads();
  return part[0];
}
__device__ __forceinline__ float BlockMax(float v, float* part) {
  v = WarpMax(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : -INFINITY;
  if (threadIdx.x < 32) t = WarpMax(t);
  if (threadIdx.x == 0) part[0] = t;
  __syncthreads();
  return part[0];
}

// One pass of kR = 2, 4 or 8 butterfly stages (h, 2h, .. of a blockwise Walsh–Hadamard transform,
// in that order) over x[0..n) in shared memory, all threads of the CUDA block; h = 1 << hshift
// and kR · h divides the transform's block. No barrier. Conflict-free from h = 32 (consecutive
// threads, consecutive words); below that 8 / kR-way bank conflicts (FwhtWarpStages avoids them).
template <int kR>
__device__ __forceinline__ void FwhtPass(float* x, int n, int hshift) {
  const int h = 1 << hshift;
  for (int gi = threadIdx.x; gi < n / kR; gi += blockDim.x) {
    const int base = ((gi >> hshift) * kR << hshift) + (gi & (h - 1));
    float v[kR];
#pragma unroll
    for (int j = 0; j < kR; ++j) v[j] = x[base + j * h];
#pragma unroll
    for (int m = 1; m < kR; m <<= 1)
#pragma unroll
      for (int j = 0; j < kR; ++j)
        if (!(j & m)) {
          const float a = v[j], c = v[j + m];
          v[j] = a + c;
          v[j + m] = a - c;
        }
#pragma unroll
    for (int j = 0; j < kR; ++j) x[base + j * h] = v[j];
  }
}

// The stages h = 1, 2, .. < min(b, 256) of a blockwise Walsh–Hadamard transform (blocks of
// b = 1 << bshift >= 8) on a warp's 256 consecutive elements: lane l holds elements 8 l .. 8 l + 7
// in v. Stages 1, 2, 4 within the lane's registers, 8 .. 128 between lanes (partner l ^ h / 8):
// the same additions and subtractions, in the same order, as FwhtPass (identical results), with
// no shared memory. Every lane of the warp calls it.
__device__ __forceinline__ void FwhtWarpStages(float (&v)[8], int bshift) {
#pragma unroll
  for (int m = 1; m < 8; m <<= 1)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (!(j & m)) {
        const float a = v[j], c = v[j + m];
        v[j] = a + c;
        v[j + m] = a - c;
      }
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int s = 0; s < 5; ++s) {
    if (s + 3 >= bshift) break;  // h = 8 << s must stay below the block
    const bool upper = (lane >> s) & 1;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p = __shfl_xor_sync(0xffffffffu, v[j], 1 << s);
      v[j] = upper ? p - v[j] : v[j] + p;  // lower: a + c, a its own; upper: a - c, a the partner's
    }
  }
}

// The stages h = 2^hs, 2^(hs + 1), .. < b = 2^bshift of a blockwise Walsh–Hadamard transform of
// x[0..n) in shared memory, three to a pass; all threads of the CUDA block; starts and ends with
// a barrier.
__device__ __forceinline__ void FwhtPasses(float* x, int n, int bshift, int hs) {
  int h = hs;
  for (; bshift - h >= 3; h += 3) {
    __syncthreads();
    FwhtPass<8>(x, n, h);
  }
  __syncthreads();
  if (bshift - h == 2) FwhtPass<4>(x, n, h);
  if (bshift - h == 1) FwhtPass<2>(x, n, h);
  __syncthreads();
}

// Whether a transform of n elements in blocks of 2^bshift can take its stages below 256 in
// registers and shuffles (FwhtWarpStages): n a multiple of 256 (so that all lanes of a warp run
// the same iterations when blockDim.x is whole warps), blocks of at least 8.
__device__ __forceinline__ bool FwhtWarpable(int n, int bshift) {
  return n % 256 == 0 && bshift >= 3 && blockDim.x % 32 == 0;
}

// x[0..n) <- H_b x blockwise (b a power of two dividing n; pairs (i, i + h) never cross a
// block since h < b), all threads of the CUDA block taking part; starts and ends with a barrier.
// The stages h = 1, 2, 4, .. run in that order: below 256 in registers and warp shuffles when
// FwhtWarpable and x is 16-byte aligned, the rest three to a pass over shared memory. Every way
// does the same operations in the same order as one stage a pass: results are identical.
__device__ __forceinline__ void SharedFwht(float* x, int n, int b) {
  int bshift = 0;
  while ((1 << bshift) < b) ++bshift;
  int h = 0;
  __syncthreads();
  if (FwhtWarpable(n, bshift) && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    // A warp's lanes take 32 consecutive 8-element chunks.
    for (int c = threadIdx.x; c < n / 8; c += blockDim.x) {
      float4* p = reinterpret_cast<float4*>(x + 8 * c);
      const float4 lo = p[0], hi = p[1];
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      FwhtWarpStages(v, bshift);
      p[0] = float4{v[0], v[1], v[2], v[3]};
      p[1] = float4{v[4], v[5], v[6], v[7]};
    }
    h = bshift < 8 ? bshift : 8;
  }
  FwhtPasses(x, n, bshift, h);
}

// Programmatic dependent launch (TQ_LAUNCH_PDL, sm_90): GridDependencyWait blocks until the
// stream's previous kernel has finished and its writes are visible; GridLaunchDependents lets
// the next kernel, when launched that way, start its set-up now. Both do nothing otherwise.
__device__ __forceinline__ void GridDependencyWait() {
#if !defined(TQ_CUDA_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void GridLaunchDependents() {
#if !defined(TQ_CUDA_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// TF32 (cvt.rna: 10-bit mantissa, rounded to nearest, ties away) as the bits of an fp32.
__device__ __forceinline__ uint32_t ToTf32(float x) {
#if defined(TQ_CUDA_EMU)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return u;
#else
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#endif
}

// c[4] += A (16x8, row) · B (8x8, col) on the tensor cores with fp32's accuracy from TF32
// parts: A = ah + al, B = bh + bl (TF32 bits), c += al·bh + ah·bl + ah·bh (al·bl, ~2^-22
// relative, dropped), three mma.m16n8k8 with fp32 accumulation. PTX fragments (g = lane / 4,
// t = lane % 4): a = {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]}, b = {B[t][g], B[t+4][g]},
// c = {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]}. Every lane of the warp calls it (the
// emulator: tests/cuda_emu/emu.h WarpMma3xTf32).
__device__ __forceinline__ void Mma3xTf32(float (&c)[4], const uint32_t (&ah)[4],
                                          const uint32_t (&al)[4], const uint32_t (&bh)[2],
                                          const uint32_t (&bl)[2]) {
#if defined(TQ_CUDA_EMU)
  ::tq::emu::WarpMma3xTf32(c, ah, al, bh, bl);
#else
#define TQ_MMA_TF32(A, B)                                                                 \
  asm volatile(                                                                           \
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
      "{%8,%9}, {%0,%1,%2,%3};"                                                           \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                    \
      : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]))
  TQ_MMA_TF32(al, bh);
  TQ_MMA_TF32(ah, bl);
  TQ_MMA_TF32(ah, bh);
#undef TQ_MMA_TF32
#endif
}

// cp.async (sm_80+): `bytes` (4, 8 or 16; src and dst aligned to it) from global to shared
// memory without going through registers; a thread's copies are grouped by CpAsyncCommit and
// waited for by CpAsyncWait<N> (until at most N of its groups are in flight; a barrier then
// makes them visible to the block). The emulator copies at once.
__device__ __forceinline__ void CpAsync(void* dst, const void* src, int bytes) {
#if defined(TQ_CUDA_EMU)
  std::memcpy(dst, src, size_t(bytes));
#else
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  if (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
  else if (bytes == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
#endif
}
__device__ __forceinline__ void CpAsyncCommit() {
#if !defined(TQ_CUDA_EMU)
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
#if !defined(TQ_CUDA_EMU)
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// The block's dynamic shared memory (TQ_LAUNCH_SMEM), 16-byte aligned; the emulator's is one
// static buffer of the H200's 227 KiB (blocks run one after another).
#if defined(TQ_CUDA_EMU)
inline float* DynamicShared() {
  alignas(16) static float buf[227 * 1024 / 4];
  return buf;
}
#else
__device__ __forceinline__ float* DynamicShared() {
  extern __shared__ float4 tq_dynamic_shared[];
  return reinterpret_cast<float*>(tq_dynamic_shared);
}
#endif

inline unsigned Blocks(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

// The smallest s with 2^s >= v (log2 of a power-of-two group or block size).
inline int CeilLog2(int64_t v) {
  int s = 0;
  while ((int64_t(1) << s) < v) ++s;
  return s;
}

}  // namespace tq::kernels::cuda
