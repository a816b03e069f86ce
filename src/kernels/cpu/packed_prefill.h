// Packed-weight products for many tokens without AMX (prefill, perplexity, batched decode past
// the decode kernels' sweet spot): an int8 GEMM on the packed codes.
// - Activations: each token's input is quantized to int8 once per call, one scale per 64 values
//   (a step; the same rounding as the decode kernels' per-step path, packed_decode.h).
// - Weights: a panel of rows (~256 KB, L2) is expanded once per call — codes to int8 centroid
//   values by the decode kernels' table lookups (stored +128 as u8), one fp32 scale per step —
//   and multiplied by all tokens in 4-row × 4-token register tiles (vpdpbusd, one fp32 multiply-
//   add per step with group scale × activation scale). vpdpbusd's +128 excess (-128·Σx per step)
//   and the affine minimums (min · Σx per group) are one small fp32 product per 16 steps.
// Exactness: not the float product. The error comes from the same two int8 roundings as the
// decode kernels (activations per 64 values, the codebook to int8); kPrefillInt8MaxNmse bounds it.
#pragma once

#include <cstdint>

#include "kernels/packed_ops.h"
#include "quant/format.h"

namespace tq::kernels::cpu {

// Tokens from which cpu::PackedMatMul takes this GEMM before the decode kernels: the panel
// expansion is a fixed cost per call, paid back by sharing it over the tokens. Measured (bench
// bench_decode_batch BM_Int8Paths, [8192, 2048] q4 g64, 1 thread, CPU ms, decode vs GEMM, AMD
// EPYC Zen 5, a busy machine): 1 row 0.39 vs 0.73, 4 rows 0.96 vs 1.11, 5-7 rows even, 8 rows
// 1.9-2.5 vs 1.6-2.1, 16 rows 4.0-4.8 vs 3.0, 64 rows 16.3 vs 7.6.
inline constexpr int64_t kPrefillInt8MinTokens = 8;
// The tokens from which cpu::PackedMatMul takes this GEMM for w: kPrefillInt8MinTokens, but 9
// at the avx512 level for groups of 128k columns, whose decode kernel chains two steps in int32
// (SegmentSteps). Measured on a 2-core Zen 4 (session 21, bench_decode_batch, the 1B TQ4 file's
// whole decode step, 2 threads, ms, GEMM vs decode kernel): 8 rows 101-108 vs 93-98, 12 rows
// 125-131 vs 133-134, 16 rows 151-166 vs 185-196 (one [8192, 2048] matrix on 1 thread favoured
// the decode kernel up to 16: BM_Int8Paths 3.2 vs 3.06 ms at 16).
int64_t PrefillInt8MinTokens(const PackedMatrix& w);

// Normalised MSE bound against the float product (kernels/ref), per format (index:
// quant::CodeFormat), for Gaussian-like activations; measured in
// tests/kernels/packed_prefill_test.cc with a 2-3x margin (the decode kernels' per-step path
// rounds the same way, packed_decode.h kFastDecodeMaxNmse).
inline constexpr double kPrefillInt8MaxNmse[quant::kNumCodeFormats] = {
    /*q1*/ 0, /*q2*/ 1e-4, /*q3*/ 1e-4, /*q4*/ 1e-4, /*q8*/ 2e-4, /*ternary*/ 0};

// True when the active ISA has the int8 GEMM for this matrix: avx512 or above, q2/q3/q4/q8,
// codebook or affine, fp16 or e8 scales, group size a multiple of 64, cols % 64 == 0; avx2 the
// same (packed_prefill_avx2.cc: the int8 operands in int16 lanes, vpmaddwd, 256-bit).
bool PrefillInt8Supports(const PackedMatrix& w);

// y [n, rows] = x [n, cols] · Ŵᵀ (+ bias). Requires PrefillInt8Supports(w); any n >= 1.
// Multithreaded over row panels (core ThreadPool).
void PrefillInt8MatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                       float* y);

namespace isa {
bool Avx512PrefillSupports(const PackedMatrix& w);  // packed_prefill_avx512.cc
void Avx512Prefill(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);
bool Avx2PrefillSupports(const PackedMatrix& w);  // packed_prefill_avx2.cc
void Avx2Prefill(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);
}  // namespace isa

}  // namespace tq::kernels::cpu
