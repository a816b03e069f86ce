// The AMX paths (Isa::kAmx) against the oracles: packed weights (every binary format x method x
// group size 16..128 x fp16/e8 scales x awkward shapes, token counts 1..33 incl. the 8-16-row
// server batches) and bf16 dense weights (hi + lo activations: fp32-grade). Skipped where the CPU
// or kernel has no AMX.
#include "kernels/cpu/amx_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_matmul_amx.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"
#include "quant/codebook.h"
#include "quant/packing.h"
#include "quant/quantized_matrix.h"

namespace tq::kernels {
namespace {

using cpu::Isa;
using quant::CodeFormat;
using quant::QuantMethod;
using test::IsaScope;
using test::Owned;
using test::RandomPacked;
using test::Scales;

bool HaveAmx() { return cpu::DetectedIsa() >= Isa::kAmx; }

// Per output: |got - want| <= 2^-7 · Σ_c |ŵ_rc·x_c| (each product carries two bf16 roundings of
// <= 2^-9); in aggregate NMSE <= kAmxPackedMaxNmse.
TEST(AmxGemm, PackedMatchesRefForEveryFormatGroupAndShape) {
  if (!HaveAmx()) GTEST_SKIP() << "no AMX on this machine";
  IsaScope scope(Isa::kAmx);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (QuantMethod m : {QuantMethod::kCodebook, QuantMethod::kAffine}) {
    for (CodeFormat f :
         {CodeFormat::kQ1, CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8}) {
      if (m == QuantMethod::kAffine && f == CodeFormat::kQ1) continue;
      for (Scales sk : {Scales::kF16, Scales::kE8}) {
        if (sk == Scales::kE8 && m == QuantMethod::kAffine) continue;  // e8 is codebook-only
        const std::string name = std::string(quant::Traits(f).name) +
                                 (m == QuantMethod::kAffine ? " affine" : "") +
                                 (sk == Scales::kE8 ? " e8" : "");
        double num = 0, den = 0;
        for (int64_t g : {16, 32, 64, 128}) {
          const int64_t u = std::max<int64_t>(g, 32);  // AMX needs cols % 32 == 0
          const int64_t shapes[][2] = {{1, u}, {17, 3 * u}, {40, 5 * u}, {300, 1024 + u}};
          for (const auto& s : shapes) {
            const int64_t rows = s[0], cols = s[1];
            const Owned o =
                RandomPacked(m, f, rows, cols, g, uint32_t(rows * 31 + cols + int(f)), sk);
            ASSERT_TRUE(cpu::AmxPackedSupports(o.view)) << name;
            std::vector<float> bias(static_cast<size_t>(rows)), wd(size_t(rows * cols));
            for (auto& b : bias) b = nd(rng);
            ref::PackedDequantizeRows(o.view, 0, rows, wd.data());
            for (int64_t n : {1, 3, 8, 13, 16, 17, 33}) {
              std::vector<float> x(size_t(n * cols));
              for (auto& v : x) v = nd(rng);
              std::vector<float> want(size_t(n * rows)), got(want.size());
              const float* b = n % 2 ? bias.data() : nullptr;
              ref::PackedMatMul(x.data(), n, o.view, b, want.data());
              cpu::AmxPackedMatMul(x.data(), n, o.view, b, got.data());
              for (int64_t t = 0; t < n; ++t) {
                for (int64_t r = 0; r < rows; ++r) {
                  double mag = 0;
                  for (int64_t c = 0; c < cols; ++c)
                    mag += std::fabs(double(wd[size_t(r * cols + c)]) * x[size_t(t * cols + c)]);
                  const size_t i = size_t(t * rows + r);
                  ASSERT_NEAR(got[i], want[i], mag / 128 + 1e-6)
                      << name << " g" << g << " [" << rows << ", " << cols << "] n=" << n;
                  num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
                  den += double(want[i]) * want[i];
                }
              }
            }
          }
        }
        std::printf("amx %s: NMSE %.2e (bound %.0e)\n", name.c_str(), num / den,
                    cpu::kAmxPackedMaxNmse);
        EXPECT_LE(num / den, cpu::kAmxPackedMaxNmse) << name;
      }
    }
  }
}

// Dense BF16 weights with hi + lo activations: lo = bf16(x - hi) leaves <= 2^-18 · |x| per input,
// so |error| <= 2^-18 · Σ|w·x| (+ fp32 summation).
TEST(AmxGemm, Bf16MatMulIsFp32Grade) {
  if (!HaveAmx()) GTEST_SKIP() << "no AMX on this machine";
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  const int64_t shapes[][2] = {{1, 32}, {15, 96}, {33, 544}, {300, 2080}};
  for (const auto& s : shapes) {
    const int64_t out = s[0], in = s[1];
    std::vector<uint16_t> wb(size_t(out * in));
    for (auto& v : wb) v = F32ToBf16(nd(rng));
    std::vector<float> bias(static_cast<size_t>(out));
    for (auto& b : bias) b = nd(rng);
    const TensorView w{wb.data(), DType::BF16, {out, in}};
    for (int64_t n : {8, 12, 16, 17, 33, 100}) {  // 8-15: the server's batched decode steps
      std::vector<float> x(size_t(n * in)), amx(size_t(n * out)), flt(amx.size());
      for (auto& v : x) v = nd(rng);
      const float* b = n % 2 ? bias.data() : nullptr;
      {
        IsaScope scope(Isa::kAmx);
        cpu::MatMul(x.data(), n, w, b, amx.data());
      }
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t o = 0; o < out; ++o) {
          double want = b ? b[o] : 0.0, mag = 0;
          for (int64_t k = 0; k < in; ++k) {
            const double p = double(Bf16ToF32(wb[size_t(o * in + k)])) * x[size_t(t * in + k)];
            want += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(amx[size_t(t * out + o)], want, 4e-6 * mag + 1e-6)
              << "[" << out << ", " << in << "] n=" << n;
        }
      }
    }
  }
}

TEST(AmxGemm, FollowsTheIsaLevelAndRefusesWhatItCannotDo) {
  const Owned q4 = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ4, 8, 64, 32, 1);
  const Owned tern = RandomPacked(QuantMethod::kCodebook, CodeFormat::kTernary, 8, 160, 32, 1);
  {
    IsaScope scope(Isa::kAvx512);
    EXPECT_FALSE(cpu::amx::Active());
    EXPECT_FALSE(cpu::AmxPackedSupports(q4.view));
    std::vector<float> x(64 * 16), y(8 * 16);
    EXPECT_THROW(cpu::AmxPackedMatMul(x.data(), 16, q4.view, nullptr, y.data()), Error);
    EXPECT_THROW(cpu::amx::PrepareActivations(x.data(), 16, 64, false), Error);
  }
  if (!HaveAmx()) return;
  IsaScope scope(Isa::kAmx);
  EXPECT_TRUE(cpu::amx::Active());
  EXPECT_TRUE(cpu::AmxPackedSupports(q4.view));
  EXPECT_FALSE(cpu::AmxPackedSupports(tern.view));  // ternary takes the float path
  std::vector<float> x(100);
  EXPECT_THROW(cpu::amx::PrepareActivations(x.data(), 2, 50, false), Error);  // 50 % 32 != 0
  EXPECT_EQ(cpu::ParseIsa("amx"), Isa::kAmx);
  // PackedMatMul takes AMX from kAmxMinTokens tokens: bit-identical to the direct call.
  const int64_t n = cpu::kAmxMinTokens;
  std::vector<float> xs(size_t(n * 64)), via(size_t(n * 8)), direct(via.size());
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(float(i));
  cpu::PackedMatMul(xs.data(), n, q4.view, nullptr, via.data());
  cpu::AmxPackedMatMul(xs.data(), n, q4.view, nullptr, direct.data());
  EXPECT_EQ(via, direct);
}

}  // namespace
}  // namespace tq::kernels
