// What the CUDA conformance tests share (cuda_conformance_test.cc: dense matmul, elementwise,
// norms, RoPE, rotation, attention, KV store, routing, data movement, memory;
// cuda_packed_conformance_test.cc: packed products and embeddings): the bounds, random inputs and
// the fixture, instantiated once (in cuda_conformance_test.cc) on "cuda" and "emu".
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "cuda_test_util.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"
#include "quant/hadamard.h"
#include "testutil/random.h"

namespace tq::kernels::conformance {

using test::Down;
using test::Expect;
using test::ExpectExact;
using test::Poisoned;
using test::Up;

// Bounds (NMSE against the double-accumulating oracle). fp32 accumulation over K terms leaves
// a relative error ~√K · 6e-8, i.e. an NMSE below 1e-11 for K <= 4096; a wrong index, scale or
// code gives O(1e-3 .. 1).
constexpr double kFp32Bound = 1e-10;      // matmuls, norms, RoPE, rotation, SiLU
constexpr double kAttentionBound = 1e-9;  // softmax over up to 32K positions
// Packed prefill (n > 8) runs on the tensor cores in 3xTF32, whose fp32 accumulation inside
// mma truncates: NMSE ~1e-9 at K = 4608 (measured 1.0-1.4e-9 on the H200); a wrong index, scale
// or code still gives O(1e-3 .. 1).
constexpr double kTensorCoreBound = 1e-8;
// Products of more than 8 tokens run as bf16 GEMMs (cuda_backend.cc GemmMode): packed weights are
// dequantized to bf16 and x rounded to bf16 once (auto), each rounding a relative error below
// 2^-8, an NMSE ~2.5e-6 per rounded operand; dense bf16 weights are exact and x is split into two
// bf16 parts (auto), so only the tensor cores' fp32 accumulation is left (kTensorCoreBound).
constexpr double kBf16Bound = 3e-5;
// The 1-token q4 product on the tensor cores (matvec_mma.cu): the 16 codebook levels rounded to
// bf16 (relative 2^-9), x split into bf16 hi + lo (~2^-17): NMSE ~1e-6.
constexpr double kMatVecMmaBound = kBf16Bound;

inline std::vector<float> Random(int64_t n, uint64_t seed, float scale = 1.0f) {
  return tq::test::RandomNormal(n, seed, scale);
}

inline std::vector<uint8_t> ToBytes(const std::vector<float>& src, DType dt) {
  std::vector<uint8_t> b(src.size() * DTypeSize(dt));
  if (dt == DType::F32) {
    std::memcpy(b.data(), src.data(), b.size());
  } else {
    auto* h = reinterpret_cast<uint16_t*>(b.data());
    for (size_t i = 0; i < src.size(); ++i)
      h[i] = dt == DType::F16 ? F32ToF16(src[i]) : F32ToBf16(src[i]);
  }
  return b;
}

inline std::string Name(DType dt) { return std::string(DTypeName(dt)); }

// Every test runs on "cuda" (a GPU) and "emu" (the same kernels on the host emulator).
class CudaConformance : public ::testing::TestWithParam<std::string> {
 protected:
  // The emulator runs each CUDA thread as a fiber (~1 µs a switch): its largest shapes are left
  // to the GPU (their code paths are those of the smaller shapes).
  bool Emulated() const { return GetParam() == "emu"; }
};
}  // namespace tq::kernels::conformance
