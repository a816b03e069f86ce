// The int8 decode kernels (kernels/cpu/packed_decode.h) against the scalar oracle (kernels/ref)
// for every ISA level this machine has × format × method × group size × awkward shapes, with the
// NMSE bounds of kFastDecodeMaxNmse; and the ISA selection (isa.h).
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
#include "kernels/cpu/packed_decode.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace tq::kernels {
namespace {

using cpu::Isa;
using quant::CodeFormat;
using quant::QuantMethod;
using test::IsaScope;

using Packed = test::Owned;
using test::RandomPacked;
using test::Scales;

std::vector<Isa> SimdLevels() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kAvx2, Isa::kAvx512})
    if (i <= cpu::DetectedIsa()) v.push_back(i);
  return v;
}

double Nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return den > 0 ? num / den : num;
}

// Per output: |got - want| <= 0.02 · Σ_c |ŵ_rc·x_c| (two int8 roundings, each <= 1/254 of a
// block maximum; affine: |ŵ| + |ŵ - min| in place of |ŵ|). Per (isa, format, method, scales): the
// NMSE over all shapes and tokens <= the format's kFastDecodeMaxNmse (a single output can be near
// zero, so NMSE is only meaningful in aggregate). Group sizes 16 .. 256, fp16 and e8 scales
// (codebook method); on AVX-512 every binary format and ternary must take the int8 kernel at every
// group size and scale encoding.
TEST(FastPackedDecode, MatchesRefForEveryIsaFormatGroupAndShape) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  int covered = 0;
  for (Isa isa : SimdLevels()) {
    IsaScope scope(isa);
    for (QuantMethod m : {QuantMethod::kCodebook, QuantMethod::kAffine}) {
      for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8,
                           CodeFormat::kTernary}) {
        if (f == CodeFormat::kTernary && m == QuantMethod::kAffine) continue;  // no such format
        for (Scales sk : {Scales::kF16, Scales::kE8}) {
          if (sk == Scales::kE8 && m == QuantMethod::kAffine) continue;  // e8 is codebook-only
          double num = 0, den = 0;
          const std::string name =
              std::string(cpu::IsaName(isa)) + " " + std::string(quant::Traits(f).name) +
              (m == QuantMethod::kAffine ? " affine" : "") + (sk == Scales::kE8 ? " e8" : "");
          // 192: 3 steps a group (one activation scale a step); 256: 2 segments of 2 steps.
          for (int64_t g : {16, 32, 64, 128, 192, 256}) {
            const int64_t u = std::max<int64_t>(g, 32);  // the kernels need cols % 32 == 0
            const int64_t big = 2048 / u * u;
            for (int64_t rows : {1, 7, 257}) {
              for (int64_t cols : {u, 3 * u, 5 * u, big, big + u}) {
                const Packed o = RandomPacked(m, f, rows, cols, g, uint32_t(rows * 131 + cols), sk);
                if (isa >= Isa::kAvx512) {
                  ASSERT_TRUE(cpu::FastDecodeSupports(o.view)) << name << " g" << g << " " << cols;
                }
                if (!cpu::FastDecodeSupports(o.view)) continue;
                ++covered;
                std::vector<float> bias(static_cast<size_t>(rows)), wd(size_t(rows * cols));
                for (auto& b : bias) b = nd(rng);
                ref::PackedDequantizeRows(o.view, 0, rows, wd.data());
                // Affine: the int8 error scales with scale · code = ŵ - min (min · Σx is exact),
                // which can exceed |ŵ|; bound with |ŵ| + |ŵ - min|.
                if (m == QuantMethod::kAffine)
                  for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < cols; ++c) {
                      float& v = wd[size_t(r * cols + c)];
                      v = std::fabs(v) +
                          std::fabs(v - F16ToF32(o.q.mins[size_t(r * (cols / g) + c / g)]));
                    }
                // Every token count 1..16 on the 7-row matrices (cheap), four elsewhere.
                std::vector<int64_t> counts = {1, 3, 6, cpu::kFastDecodeMaxTokens};
                if (rows == 7) {
                  counts.clear();
                  for (int64_t n = 1; n <= cpu::kFastDecodeMaxTokens; ++n) counts.push_back(n);
                }
                for (int64_t n : counts) {
                  std::vector<float> x(size_t(n * cols));
                  for (auto& v : x) v = nd(rng);
                  std::vector<float> want(size_t(n * rows)), got(want.size());
                  const float* b = n == 3 ? bias.data() : nullptr;
                  ref::PackedMatMul(x.data(), n, o.view, b, want.data());
                  cpu::FastPackedDecode(x.data(), n, o.view, b, got.data());
                  for (int64_t t = 0; t < n; ++t) {
                    for (int64_t r = 0; r < rows; ++r) {
                      double mag = 0;
                      for (int64_t c = 0; c < cols; ++c)
                        mag +=
                            std::fabs(double(wd[size_t(r * cols + c)]) * x[size_t(t * cols + c)]);
                      const size_t i = size_t(t * rows + r);
                      const double bb = b ? b[r] : 0.0;
                      ASSERT_NEAR(got[i], want[i], 0.02 * mag + 1e-5 * std::fabs(bb))
                          << name << " g" << g << " [" << rows << ", " << cols << "] n=" << n
                          << " token " << t << " row " << r;
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
                      cpu::kFastDecodeMaxNmse[int(f)]);
          EXPECT_LE(num / den, cpu::kFastDecodeMaxNmse[int(f)]) << name;
        }
      }
    }
  }
  if (cpu::DetectedIsa() >= Isa::kAvx512) {
    EXPECT_GT(covered, 0);
    IsaScope scope(Isa::kAvx512);  // ternary has an int8 kernel there (with a shortened chunk)
    EXPECT_TRUE(cpu::FastDecodeSupports(
        RandomPacked(QuantMethod::kCodebook, CodeFormat::kTernary, 4, 2048, 64, 1).view));
  }
}

// q8's 256-level lookup on AVX2 has two paths (avx2_codes.h): the half table for an
// antisymmetric int8 table (the Gaussian codebook's, checked here so the test covers that path)
// and 16 masked vpshufb for any other; both against the oracle, decode and the int8 GEMM.
TEST(FastPackedDecode, Q8SymmetricAndSkewedCodebooks) {
  if (cpu::DetectedIsa() < Isa::kAvx2) GTEST_SKIP();
  IsaScope scope(Isa::kAvx2);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (bool skew : {false, true}) {
    Packed o = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ8, 37, 640, 64, skew ? 9 : 8);
    std::vector<float>& cb = o.q.codebook;
    if (skew) {
      for (float& v : cb) v = v + 0.3f * v * v / 16.0f;  // still ascending, no longer symmetric
      o.view.codebook = cb.data();
    }
    float amax = 0;
    for (float v : cb) amax = std::max(amax, std::fabs(v));
    bool antisymmetric = true;
    for (int i = 0; i < 128; ++i)
      antisymmetric = antisymmetric && std::lrintf(cb[size_t(i)] * 127 / amax) ==
                                           -std::lrintf(cb[size_t(255 - i)] * 127 / amax);
    EXPECT_EQ(antisymmetric, !skew);
    for (int64_t n : {1, 2, 5, 12}) {
      std::vector<float> x(size_t(n * 640)), want(size_t(n * 37)), got(want.size());
      for (auto& v : x) v = nd(rng);
      ref::PackedMatMul(x.data(), n, o.view, nullptr, want.data());
      cpu::PackedMatMul(x.data(), n, o.view, nullptr, got.data());
      EXPECT_LE(Nmse(got, want), cpu::kFastDecodeMaxNmse[int(CodeFormat::kQ8)])
          << (skew ? "skewed" : "symmetric") << " n=" << n;
    }
  }
}

// q8 with convert's linear codebook (quant::LinearQ8Codebook: codes read as int8 c - 128, no
// lookup) on AVX2 and AVX-512 (the code is the u8 weight of vpdpbusd): decode (steps, units,
// groups of 16; fp16 and e8 scales) and the int8 GEMM against the oracle, random codes and the
// extreme ones (every code 0: w = -128, whose |w| = 128 must not saturate vpmaddubsw's pair sums
// with |x| = 127 of either sign, and every code 255).
TEST(FastPackedDecode, Q8LinearCodebook) {
  if (cpu::DetectedIsa() < Isa::kAvx2) GTEST_SKIP();
  std::mt19937 rng(6);
  std::normal_distribution<float> nd;
  const std::vector<float>& lin = quant::LinearQ8Codebook().levels;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (cpu::DetectedIsa() < isa) continue;
    IsaScope scope(isa);
    for (int64_t g : {16, 32, 64, 128})
      for (Scales sc : {Scales::kF16, Scales::kE8})
        for (int fill : {-1, 0, 255}) {  // -1: random codes
          Packed o = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ8, 37, 640, g, 10, sc);
          o.q.codebook = lin;
          o.view.codebook = o.q.codebook.data();
          if (fill >= 0) std::fill(o.q.codes.begin(), o.q.codes.end(), uint8_t(fill));
          o.view.codes = o.q.codes.data();
          ASSERT_TRUE(cpu::FastDecodeSupports(o.view));
          for (int64_t n : {1, 2, 5, 12, 40}) {  // 40: the int8 GEMM
            std::vector<float> x(size_t(n * 640)), want(size_t(n * 37)), got(want.size());
            for (auto& v : x) v = fill >= 0 ? (nd(rng) > 0 ? 1.0f : -1.0f) : nd(rng);
            ref::PackedMatMul(x.data(), n, o.view, nullptr, want.data());
            cpu::PackedMatMul(x.data(), n, o.view, nullptr, got.data());
            EXPECT_LE(Nmse(got, want), cpu::kFastDecodeMaxNmse[int(CodeFormat::kQ8)])
                << cpu::IsaName(isa) << " g" << g << (sc == Scales::kE8 ? " e8" : " f16")
                << " fill " << fill << " n=" << n;
          }
        }
  }
}

// Through the public entry point: the dispatch takes the int8 kernel for one token and the
// generic path when forced to scalar; both agree with the oracle.
TEST(FastPackedDecode, PackedMatMulDispatchFollowsIsa) {
  const Packed o = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ4, 300, 512, 64, 5);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  std::vector<float> x(512), want(300), got(300);
  for (auto& v : x) v = nd(rng);
  ref::PackedMatMul(x.data(), 1, o.view, nullptr, want.data());
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    IsaScope scope(isa);
    EXPECT_LE(cpu::ActiveIsa(), cpu::DetectedIsa());
    cpu::PackedMatMul(x.data(), 1, o.view, nullptr, got.data());
    EXPECT_LE(Nmse(got, want), cpu::kFastDecodeMaxNmse[int(CodeFormat::kQ4)]) << cpu::IsaName(isa);
    if (cpu::ActiveIsa() == Isa::kScalar) {
      EXPECT_FALSE(cpu::FastDecodeSupports(o.view));
    }
  }
}

TEST(FastPackedDecode, UnsupportedCallIsAnError) {
  const Packed o = RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ1, 4, 160, 32, 1);
  std::vector<float> x(160), y(4);
  EXPECT_FALSE(cpu::FastDecodeSupports(o.view));
  EXPECT_THROW(cpu::FastPackedDecode(x.data(), 1, o.view, nullptr, y.data()), Error);
}

TEST(Isa, NamesParseAndUnknownIsAnError) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx})
    EXPECT_EQ(cpu::ParseIsa(cpu::IsaName(i)), i);
  try {
    cpu::ParseIsa("sse9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("TURBOQUANT_ISA"), std::string::npos);
  }
  const Isa saved = cpu::ActiveIsa();
  EXPECT_EQ(cpu::SetActiveIsa(Isa::kAvx512), std::min(Isa::kAvx512, cpu::DetectedIsa()));
  EXPECT_EQ(cpu::SetActiveIsa(Isa::kAmx), cpu::DetectedIsa());
  EXPECT_EQ(cpu::SetActiveIsa(Isa::kScalar), Isa::kScalar);
  cpu::SetActiveIsa(saved);
}

}  // namespace
}  // namespace tq::kernels
