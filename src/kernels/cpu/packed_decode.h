// Packed-weight matrix-vector products for few tokens (decode, 1-16), with int8 activations:
// each token's (rotated) input is quantized to int8 per 32 values (groups of 64·k: per 64, or on
// AVX-512 per 128 where a group spans an even number of 64-code steps, so a step's or segment's
// float factor is one scalar) once per call, codes become
// int8 centroid values through a byte shuffle of the per-tensor codebook (scaled to int8 once per
// call), integer dot products accumulate per 32-code unit (VNNI vpdpbusd on AVX-512, maddubs on
// AVX2), and one fp32 scale per unit (group scale × activation scale) brings them to float. Group
// scales are fp16 or e8 (PackedMatrix::scale_codes + scale_table), group sizes 16, 32 and
// multiples of 64 (AVX2: 16 and multiples of 32; ternary: multiples of 16).
// Error against the float product comes from the two int8 roundings: see kFastDecodeMaxNmse.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/packed_ops.h"
#include "quant/format.h"

namespace tq::kernels::cpu {

// Tokens up to which PackedMatMul takes the int8 path. Rows are taken 4 at a time with up to 4
// tokens per pass, so a row's codes are expanded once per 4 tokens. Measured (bench
// BM_DecodeHot, n=16 vs n=17): at 16 tokens the int8 path is 2.4-5.7x faster per token than the
// tiled dequantize + fp32 GEMM path on AVX-512 and 1.5x on AVX2 (q8); lower this if the tiled
// path (packed_matmul*.cc) gets faster.
inline constexpr int64_t kFastDecodeMaxTokens = 16;

// Normalised MSE of the int8 path's output against the float product (kernels/ref), per format
// (index: quant::CodeFormat), for Gaussian-like activations; measured in
// tests/kernels/fast_packed_decode_test.cc with a 2-3x margin. q8 is dominated by rounding its
// 256-level codebook to int8 (its levels are closer together than the int8 step near the tails).
inline constexpr double kFastDecodeMaxNmse[quant::kNumCodeFormats] = {
    /*q1*/ 0, /*q2*/ 1e-4, /*q3*/ 1e-4, /*q4*/ 1e-4, /*q8*/ 2e-4, /*ternary*/ 1e-4};

// True when the active ISA has an int8 kernel for this matrix (format, method, group size).
bool FastDecodeSupports(const PackedMatrix& w);

// y [n, rows] = x [n, cols] · Ŵᵀ (+ bias) with the int8 kernels; n <= kFastDecodeMaxTokens and
// FastDecodeSupports(w). Multithreaded over rows (core ThreadPool).
void FastPackedDecode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                      float* y);

// Runs body(begin, end) over the rows [0, rows) of a [rows, cols] matrix-vector product: inline
// for small matrices, else as dynamic tasks of whole 4-row blocks, ~8 per thread, so a thread
// slowed by other load does not hold the others up.
template <typename Body>
void ForRowBlocks(int64_t rows, int64_t cols, Body&& body) {
  if (rows * cols < 65536 || rows < 8) {
    body(int64_t{0}, rows);
    return;
  }
  ThreadPool& pool = ThreadPool::Global();
  const int64_t per = std::max<int64_t>(4, (rows / (8 * pool.size()) + 3) / 4 * 4);
  const int64_t tasks = (rows + per - 1) / per;
  pool.Run(tasks, [&](int64_t task, int) { body(task * per, std::min(rows, (task + 1) * per)); });
}

namespace isa {
// One implementation per ISA (packed_decode_avx512.cc, packed_decode_avx2.cc).
bool Avx512Supports(const PackedMatrix& w);
void Avx512Decode(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);
bool Avx512TernarySupports(const PackedMatrix& w);  // packed_decode_ternary_avx512.cc
void Avx512TernaryDecode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                         float* y);
bool Avx2Supports(const PackedMatrix& w);
void Avx2Decode(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);
}  // namespace isa

}  // namespace tq::kernels::cpu
