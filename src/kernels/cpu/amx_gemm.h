// Many-token matmul on AMX tiles (Isa::kAmx): y [n, rows] = x [n, k] · Wᵀ (+ bias) with bf16
// operands and fp32 accumulation (tdpbf16ps).
//
// Operands: the weights are the A side, bf16 row-major [16 rows, 32 k] tiles from a per-block
// buffer the caller fills (dequantized codes, or copied bf16 rows: the copy gets a row stride
// that is not a power of two, so a tile's 16 rows do not share a few L1 sets); the activations
// are the B side, converted once per call to bf16 in the AMX "VNNI" layout blocked by tokens,
// [n_pad / tb][k / 2][tb][2] (tb = 16 or 32), so the B tiles of one token block are contiguous.
// With `split`, x is carried as hi + lo (two bf16: ~16 mantissa bits, so the product keeps
// fp32-grade activations at twice the tile work); without it, x is rounded to bf16 (relative
// error <= 2^-9 per element).
// Blocking: each task owns a panel of <= 256 weight rows (multithreaded over rows), walks k in
// blocks of 256 and all tokens per block; C lives in a per-task fp32 buffer [panel rows][n_pad]
// in L2 and is transposed into y once at the end. No allocation per call (thread-local scratch).
#pragma once

#include <cstdint>
#include <functional>

namespace tq::kernels::cpu::amx {

// k must be a multiple of this (one tile holds 32 bf16 of a row).
inline constexpr int64_t kKMultiple = 32;

// True when the active ISA level is amx (CPU support and the kernel's permission checked).
bool Active();

// x [n, k] in the B layout; valid until the next PrepareActivations on this thread.
struct Activations {
  const uint16_t* hi = nullptr;  // bf16 [n_pad / tb][k / 2][tb][2]
  const uint16_t* lo = nullptr;  // x - hi, same layout; null without split
  int64_t n = 0, n_pad = 0, tb = 0, k = 0;
};
Activations PrepareActivations(const float* x, int64_t n, int64_t k, bool split);

// Fills buf [count][ld] (bf16) with weight rows r0 .. r0+count-1, columns k0 .. k0+kc-1.
using WeightRows = std::function<void(int64_t r0, int64_t count, int64_t k0, int64_t kc,
                                      uint16_t* buf, int64_t ld)>;

// y [a.n, rows] = x · Wᵀ (+ bias[rows] when not null). Requires Active() and a.k % 32 == 0.
void Gemm(const Activations& a, int64_t rows, const WeightRows& w, const float* bias, float* y);

}  // namespace tq::kernels::cpu::amx
