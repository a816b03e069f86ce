// The int8 prefill GEMM (kernels/cpu/packed_prefill.h) against the scalar oracle (kernels/ref):
// every format × method × scale encoding × group size it takes, awkward shapes (a row count that
// is not a multiple of the 4-row tile, panels and token tiles that end part way), token counts
// that leave 1-3 tokens for the last tile, with bias; the NMSE bound kPrefillInt8MaxNmse; the
// public dispatch (cpu::PackedMatMul takes it for many tokens at the avx2 and avx512 levels, avx2
// forced on an AVX-512 machine); unsupported matrices are an error.
#include "kernels/cpu/packed_prefill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"

namespace tq::kernels {
namespace {

using cpu::Isa;
using quant::CodeFormat;
using quant::QuantMethod;
using test::IsaScope;
using test::RandomPacked;
using test::Scales;

// The levels with an int8 GEMM that this CPU has (avx2 is forced on an AVX-512 machine).
std::vector<Isa> GemmLevels() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kAvx2, Isa::kAvx512})
    if (i <= cpu::DetectedIsa()) v.push_back(i);
  if (v.empty())
    std::printf("skipped: this CPU has no AVX2 (detected %s)\n",
                std::string(cpu::IsaName(cpu::DetectedIsa())).c_str());
  return v;
}

// Per output: |got - want| <= 0.02 · Σ_c |ŵ_rc·x_c| (two int8 roundings, each <= 1/254 of a
// step's or the codebook's maximum; affine: |ŵ| + |ŵ - min| in place of |ŵ|, as the error scales
// with the code, not the minimum). Per (format, method, scales) over all shapes: NMSE <=
// kPrefillInt8MaxNmse.
TEST(PackedPrefillInt8, MatchesRefForEveryFormatGroupAndShape) {
  const std::vector<Isa> levels = GemmLevels();
  if (levels.empty()) GTEST_SKIP();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (Isa isa : levels) {
    IsaScope scope(isa);
    for (QuantMethod m : {QuantMethod::kCodebook, QuantMethod::kAffine}) {
      for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8}) {
        for (Scales sk : {Scales::kF16, Scales::kE8}) {
          if (sk == Scales::kE8 && m == QuantMethod::kAffine) continue;  // e8 is codebook-only
          const std::string name =
              std::string(cpu::IsaName(isa)) + " " + std::string(quant::Traits(f).name) +
              (m == QuantMethod::kAffine ? " affine" : "") + (sk == Scales::kE8 ? " e8" : "");
          double num = 0, den = 0;
          for (int64_t g : {64, 128}) {
            for (int64_t rows : {1, 7, 257}) {
              for (int64_t cols : {g, 3 * g, int64_t{1152}, int64_t{2048}}) {
                if (cols % g) continue;
                const test::Owned o =
                    RandomPacked(m, f, rows, cols, g, uint32_t(rows * 7 + cols), sk);
                ASSERT_TRUE(cpu::PrefillInt8Supports(o.view)) << name << " g" << g;
                std::vector<float> bias(static_cast<size_t>(rows)), wd(size_t(rows * cols));
                for (auto& b : bias) b = nd(rng);
                ref::PackedDequantizeRows(o.view, 0, rows, wd.data());
                if (m == QuantMethod::kAffine)
                  for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < cols; ++c) {
                      float& v = wd[size_t(r * cols + c)];
                      v = std::fabs(v) +
                          std::fabs(v - F16ToF32(o.q.mins[size_t(r * (cols / g) + c / g)]));
                    }
                for (int64_t n : {1, 6, 17, 67}) {
                  std::vector<float> x(size_t(n * cols));
                  for (auto& v : x) v = nd(rng);
                  if (n == 6)  // a token of zeros (scale 0) and one with an outlier
                    for (int64_t c = 0; c < cols; ++c) {
                      x[size_t(c)] = 0.0f;
                      if (c == 5) x[size_t(cols + c)] = 40.0f;
                    }
                  std::vector<float> want(size_t(n * rows)), got(want.size(), -1.0f);
                  const float* b = n == 17 ? bias.data() : nullptr;
                  ref::PackedMatMul(x.data(), n, o.view, b, want.data());
                  cpu::PrefillInt8MatMul(x.data(), n, o.view, b, got.data());
                  for (int64_t t = 0; t < n; ++t) {
                    // The outlier token: its first segment's other values round with a step
                    // of 40 / 127, so the bound is the rounding's own: Σ_c |ŵ_c| · max|x|_seg
                    // / 254 (a segment: 2 steps of 64 where g and the row hold whole pairs — the
                    // avx512 GEMM's activation blocks —, else one step).
                    const bool outlier = n == 6 && t == 1;
                    const int64_t seg = (g / 64) % 2 == 0 && (cols / 64) % 2 == 0 ? 128 : 64;
                    std::vector<double> step_max(size_t(cols / 64));
                    for (int64_t c = 0; c < cols; ++c)
                      step_max[size_t(c / seg)] = std::max<double>(
                          step_max[size_t(c / seg)], std::fabs(x[size_t(t * cols + c)]));
                    for (int64_t r = 0; r < rows; ++r) {
                      double mag = 0, rounding = 0;
                      for (int64_t c = 0; c < cols; ++c) {
                        const double wv = std::fabs(double(wd[size_t(r * cols + c)]));
                        mag += wv * std::fabs(x[size_t(t * cols + c)]);
                        rounding += wv * step_max[size_t(c / seg)] / 254.0;
                      }
                      const size_t i = size_t(t * rows + r);
                      const double bb = b ? b[r] : 0.0;
                      ASSERT_NEAR(
                          got[i], want[i],
                          0.02 * mag + (outlier ? rounding : 0.0) + 1e-5 * std::fabs(bb) + 1e-6)
                          << name << " g" << g << " [" << rows << ", " << cols << "] n=" << n
                          << " token " << t << " row " << r;
                      if (outlier) continue;  // NMSE: Gaussian tokens only
                      num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
                      den += (want[i] - bb) * (want[i] - bb);
                    }
                  }
                }
              }
            }
          }
          if (den == 0) continue;
          std::printf("%s: NMSE %.2e (bound %.0e)\n", name.c_str(), num / den,
                      cpu::kPrefillInt8MaxNmse[int(f)]);
          EXPECT_LE(num / den, cpu::kPrefillInt8MaxNmse[int(f)]) << name;
        }
      }
    }
  }
}

// Large enough that rows split into several panels per thread and tokens into several tiles.
TEST(PackedPrefillInt8, ManyPanelsAndTokenTiles) {
  for (Isa isa : GemmLevels()) {
    IsaScope scope(isa);
    const int64_t rows = 1030, cols = 4096, n = 150;
    const test::Owned o =
        RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ4, rows, cols, 64, 3, Scales::kF16);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    std::vector<float> x(size_t(n * cols)), want(size_t(n * rows)), got(want.size());
    for (auto& v : x) v = nd(rng);
    ref::PackedMatMul(x.data(), n, o.view, nullptr, want.data());
    cpu::PackedMatMul(x.data(), n, o.view, nullptr, got.data());  // the public dispatch
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      den += double(want[i]) * want[i];
    }
    EXPECT_LE(num / den, cpu::kPrefillInt8MaxNmse[int(CodeFormat::kQ4)]);
    std::vector<float> direct(want.size());
    cpu::PrefillInt8MatMul(x.data(), n, o.view, nullptr, direct.data());
    EXPECT_EQ(got, direct) << "cpu::PackedMatMul did not take the int8 GEMM at "
                           << cpu::IsaName(isa);
  }
}

// Rows whose steps span several k chunks (67 steps: 32 + 32 + 3), at token counts on both sides
// of the avx2 GEMM's switch from L1 row blocks (few tokens: one token tile) to L2 panels (30 and
// 31 tokens at 4288 columns), with a row count that leaves a 1-row tail.
TEST(PackedPrefillInt8, RowsAcrossChunksFewAndManyTokens) {
  for (Isa isa : GemmLevels()) {
    IsaScope scope(isa);
    const int64_t rows = 37, cols = 4288;
    for (QuantMethod m : {QuantMethod::kCodebook, QuantMethod::kAffine}) {
      const test::Owned o = RandomPacked(m, CodeFormat::kQ3, rows, cols, 64, 11, Scales::kF16);
      std::mt19937 rng(9);
      std::normal_distribution<float> nd;
      for (int64_t n : {3, 8, 30, 31}) {
        std::vector<float> x(size_t(n * cols)), want(size_t(n * rows)), got(want.size());
        for (auto& v : x) v = nd(rng);
        ref::PackedMatMul(x.data(), n, o.view, nullptr, want.data());
        cpu::PrefillInt8MatMul(x.data(), n, o.view, nullptr, got.data());
        double num = 0, den = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
          den += double(want[i]) * want[i];
        }
        EXPECT_LE(num / den, cpu::kPrefillInt8MaxNmse[int(CodeFormat::kQ3)])
            << cpu::IsaName(isa) << (m == QuantMethod::kAffine ? " affine" : "") << " n=" << n;
      }
    }
  }
}

TEST(PackedPrefillInt8, UnsupportedIsAnError) {
  const test::Owned o = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ4, 4, 256, 32, 1);
  std::vector<float> x(256), y(4);
  {
    IsaScope scope(Isa::kAvx512);
    EXPECT_FALSE(cpu::PrefillInt8Supports(o.view));  // group size 32
    EXPECT_THROW(cpu::PrefillInt8MatMul(x.data(), 1, o.view, nullptr, y.data()), Error);
  }
  IsaScope scalar(Isa::kScalar);
  const test::Owned g64 = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ4, 4, 256, 64, 1);
  EXPECT_FALSE(cpu::PrefillInt8Supports(g64.view));
}

}  // namespace
}  // namespace tq::kernels
