// Packed-weight matmul for many tokens on AMX tiles (amx_gemm.h): each weight panel's k block is
// dequantized to bf16 (codes -> codebook value · fp16 group scale, rounded once to bf16) into an
// L2-resident buffer and multiplied by all tokens with tdpbf16ps. Activations are rounded to
// bf16. Error against the float product: see kAmxPackedMaxNmse.
#pragma once

#include <cstdint>

#include "kernels/packed_ops.h"

namespace tq::kernels::cpu {

// Tokens from which PackedMatMul takes the AMX path before the int8 decode kernels. Measured
// (bench_prefill_gemm BM_BatchGemm, [8192, 2048] q4 g64, 1 thread, CPU ms, int8 vs amx): 8 rows
// 2.41 vs 2.57, 12 rows 3.83 vs 2.50, 16 rows 4.79 vs 2.90; 32 rows (bench_decode_batch
// BM_PackedRows, int8 in chunks) 24 vs 2.7.
inline constexpr int64_t kAmxMinTokens = 10;

// Normalised MSE bound of the AMX path against the float product (two bf16 roundings of
// relative size <= 2^-9: 5.2-5.7e-6 measured for every format; tests/kernels/amx_gemm_test.cc).
inline constexpr double kAmxPackedMaxNmse = 2e-5;

// True when the amx level is active and the format has a bf16 dequantizer here (binary formats;
// ternary takes the float path), cols % 32 == 0 and group_size 16 or a multiple of 32; fp16 or e8
// scales.
bool AmxPackedSupports(const PackedMatrix& w);

// y [n, rows] = x [n, cols] · Ŵᵀ (+ bias). Requires AmxPackedSupports(w).
void AmxPackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);

}  // namespace tq::kernels::cpu
