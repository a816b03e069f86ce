// Hadamard blocks beyond powers of two, for turboquant-mlx imports (io/tqmlx_import.h): blocks
// b = m · 2^k with m in {12, 20, 28}, what mx.hadamard_transform supports. Our converter only
// makes power-of-two blocks; every rotation of quant/hadamard.h (RotateForward / RotateInverse /
// RotateRowsForward / HadamardRotation) also takes these.
//
// H_b = H_m ⊗ H_{2^k}: with x viewed as [m][2^k] (index j · 2^k + i), every row gets the
// Sylvester transform and every column the m x m matrix SmallHadamard(m), so
//   R x = blockdiag(H_b) · diag(s) · x / √b   as for power-of-two blocks.
// H_m is not symmetric: the inverse applies its transpose (R⁻¹ = diag(s) · blockdiag(H_bᵀ) / √b).
#pragma once

#include <cstdint>
#include <span>

namespace tq::quant {

// True when b = m * 2^k, m in {1, 12, 20, 28}, b > 0: the blocks quant/hadamard.h rotates with.
bool IsHadamardBlock(int64_t b);
// m of such a block (1 for a power of two); 0 when b is none.
int64_t HadamardBlockFactor(int64_t b);
// The m x m ±1 matrix (m = 12, 20, 28; row-major; H Hᵀ = m I): the matrices of N. J. A. Sloane's
// library (neilsloane.com/hadamard) in the form mx.hadamard_transform uses. Throws for another m.
std::span<const int8_t> SmallHadamard(int64_t m);
// x[0..b) <- H_b x (transpose: H_bᵀ x), unscaled, for any IsHadamardBlock(b).
void HadamardBlockTransform(float* x, int64_t b, bool transpose = false);

}  // namespace tq::quant
