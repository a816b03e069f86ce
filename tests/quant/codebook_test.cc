#include "quant/codebook.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "quant/hadamard.h"
#include "quant/rng.h"

namespace tq::quant {
namespace {

// Positive half of a symmetric codebook vs published Lloyd-Max values (Max 1960).
void ExpectPositiveLevels(const Codebook& cb, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(cb.size(), int(2 * expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(cb.levels[expected.size() + i], expected[i], tol) << i;
    EXPECT_NEAR(cb.levels[expected.size() - 1 - i], -expected[i], tol) << i;
  }
}

TEST(CodebookTest, GaussianKnownCentroidsAndMse) {
  ExpectPositiveLevels(GaussianCodebook(1), {0.7979}, 1e-4);
  EXPECT_NEAR(GaussianCodebook(1).levels[1], std::sqrt(2 / M_PI), 1e-7);
  EXPECT_NEAR(GaussianCodebook(1).mse, 1 - 2 / M_PI, 1e-7);  // 0.3634
  ExpectPositiveLevels(GaussianCodebook(2), {0.4528, 1.5104}, 1e-4);
  EXPECT_NEAR(GaussianCodebook(2).mse, 0.1175, 1e-4);
  ExpectPositiveLevels(GaussianCodebook(3), {0.2451, 0.7560, 1.3439, 2.1520}, 1e-4);
  EXPECT_NEAR(GaussianCodebook(3).mse, 0.03455, 1e-5);
  ExpectPositiveLevels(GaussianCodebook(4),
                       {0.1284, 0.3881, 0.6568, 0.9424, 1.2562, 1.6180, 2.0690, 2.7326}, 2e-4);
  // Max's table says 0.009497; exact integration of his levels gives 0.009501.
  EXPECT_NEAR(GaussianCodebook(4).mse, 0.009497, 1e-5);
  // 8 bits: ~ (√3 π / 2) 4^-8 · ... , in practice 4.1e-5.
  EXPECT_EQ(GaussianCodebook(8).size(), 256);
  EXPECT_GT(GaussianCodebook(8).mse, 3.5e-5);
  EXPECT_LT(GaussianCodebook(8).mse, 4.5e-5);
  // Panter–Dite high-resolution limit √3π/2 · 4^-b is an upper-ish guide at 8 bits.
  EXPECT_NEAR(GaussianCodebook(8).mse / (std::sqrt(3.0) * M_PI / 2 * std::pow(4.0, -8)), 1.0, 0.02);
}

TEST(CodebookTest, TernaryIsLloydMaxWithZero) {
  const Codebook& t = TernaryCodebook();
  ASSERT_EQ(t.size(), 3);
  EXPECT_EQ(t.levels[1], 0.0f);
  EXPECT_NEAR(t.levels[2], 1.2240, 1e-4);
  EXPECT_NEAR(t.levels[0], -1.2240, 1e-4);
  EXPECT_NEAR(t.thresholds[1], 0.6120, 1e-4);
  EXPECT_NEAR(t.mse, 0.1902, 1e-4);
  EXPECT_EQ(&GaussianCodebook(CodeFormat::kTernary), &t);
  EXPECT_EQ(&GaussianCodebook(CodeFormat::kQ3), &GaussianCodebook(3));
}

// Lloyd-Max optimality: every level is the centroid of its cell and every threshold the midpoint
// (checked with independent Gaussian integrals), and a different start converges to the same book.
TEST(CodebookTest, StationaryAndRecomputable) {
  for (int bits : {1, 2, 3, 4, 8}) {
    const Codebook& cb = GaussianCodebook(bits);
    for (int i = 0; i < cb.size(); ++i) {
      const double a = i == 0 ? -40.0 : cb.thresholds[size_t(i) - 1];
      const double b = i == cb.size() - 1 ? 40.0 : cb.thresholds[size_t(i)];
      const double pa = std::exp(-a * a / 2), pb = std::exp(-b * b / 2);
      const double mass = 0.5 * (std::erf(b / std::sqrt(2.0)) - std::erf(a / std::sqrt(2.0)));
      const double centroid = (pa - pb) / std::sqrt(2 * M_PI) / mass;
      EXPECT_NEAR(cb.levels[size_t(i)], centroid, 2e-6) << bits << " " << i;
    }
    LloydOptions tight;
    tight.tolerance = 1e-14;
    const Codebook again = LloydMax(GaussianDensity(), cb.size(), tight);
    for (int i = 0; i < cb.size(); ++i)
      EXPECT_NEAR(again.levels[size_t(i)], cb.levels[size_t(i)], 1e-6);
  }
}

TEST(CodebookTest, MonteCarloMseMatches) {
  SplitMix64 rng(11);
  for (int bits : {1, 2, 3, 4}) {
    const Codebook& cb = GaussianCodebook(bits);
    double se = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const float x = float(rng.Normal());
      const double d = x - cb.Decode(cb.Encode(x));
      se += d * d;
    }
    EXPECT_NEAR(se / n / cb.mse, 1.0, 0.02) << bits;
  }
}

TEST(CodebookTest, EncodeIsNearestLevel) {
  SplitMix64 rng(3);
  for (const Codebook* cb :
       {&GaussianCodebook(2), &GaussianCodebook(4), &GaussianCodebook(8), &TernaryCodebook()}) {
    for (int i = 0; i < 20000; ++i) {
      const float x = float(rng.Normal() * 2.0);
      const int code = cb->Encode(x);
      for (int j = 0; j < cb->size(); ++j)
        ASSERT_LE(std::abs(x - cb->levels[size_t(code)]),
                  std::abs(x - cb->levels[size_t(j)]) + 1e-6f);
    }
    EXPECT_EQ(cb->Encode(-1e30f), 0);
    EXPECT_EQ(cb->Encode(1e30f), cb->size() - 1);
    EXPECT_EQ(cb->Encode(cb->thresholds[0]), 0);  // ties go to the lower index
    std::vector<float> x = {0.1f, -3.0f, 2.5f};
    std::vector<uint8_t> codes(3);
    cb->EncodeSpan(x.data(), 3, 0.5f, codes.data());
    EXPECT_EQ(codes[2], cb->Encode(1.25f));
  }
}

// The paper's distortion: random unit vector, rotate, scale coordinates by √d, quantize,
// un-rotate: E‖x - x̂‖² = 0.3634 / 0.1175 / 0.03455 / 0.009497 (paper: 0.36 / 0.117 / 0.03 /
// 0.009) within ±5%, for d = 128 .. 4096.
TEST(CodebookTest, PaperDistortionOnRandomUnitVectors) {
  const double expected[5] = {0, 0.3634, 0.1175, 0.03455, 0.009497};
  const double paper[5] = {0, 0.36, 0.117, 0.03, 0.009};
  SplitMix64 rng(2024);
  for (int64_t d : {128, 512, 4096}) {
    const HadamardRotation rot = HadamardRotation::Make(d, uint64_t(d));
    std::vector<float> x(static_cast<size_t>(d)), y(static_cast<size_t>(d));
    for (int bits = 1; bits <= 4; ++bits) {
      const Codebook& cb = GaussianCodebook(bits);
      const int trials = int(65536 / d) + 16;
      double dist = 0;
      for (int t = 0; t < trials; ++t) {
        double norm = 0;
        for (auto& v : x) {
          v = float(rng.Normal());
          norm += double(v) * v;
        }
        for (auto& v : x) v = float(v / std::sqrt(norm));
        y = x;
        rot.Forward(y.data());
        const float s = float(std::sqrt(double(d)));
        for (auto& v : y) v = cb.Decode(cb.Encode(v * s)) / s;
        rot.Inverse(y.data());
        for (int64_t i = 0; i < d; ++i) dist += std::pow(double(x[size_t(i)]) - y[size_t(i)], 2);
      }
      dist /= trials;
      EXPECT_NEAR(dist / expected[bits], 1.0, 0.05) << "d=" << d << " bits=" << bits;
      EXPECT_NEAR(dist, paper[bits], 0.2 * paper[bits]) << "d=" << d << " bits=" << bits;
    }
  }
}

TEST(CodebookTest, SphereCodebooks) {
  for (int d : {64, 128}) {
    const SphereCoordinateDensity density(d);
    double m0, m1, m2;
    density.Moments(density.lo(), density.hi(), &m0, &m1, &m2);
    EXPECT_NEAR(m0, 1.0, 1e-9);
    EXPECT_NEAR(m1, 0.0, 1e-9);
    EXPECT_NEAR(m2, 1.0, 1e-6) << "coordinate variance of √d·(unit vector) is 1";
    for (int bits : {2, 3, 4}) {
      const Codebook& sphere = SphereCodebook(d, bits);
      const double gauss_mse = CodebookMse(GaussianCodebook(bits), density);
      EXPECT_LE(sphere.mse, gauss_mse) << d << " " << bits;
      EXPECT_GT(sphere.mse, 0.97 * gauss_mse) << "the gain is small at these dims";
      EXPECT_LT(sphere.levels.back(), GaussianCodebook(bits).levels.back());
    }
  }
  // Large d tends to the Gaussian codebook.
  const Codebook& big = SphereCodebook(4096, 3);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(big.levels[size_t(i)], GaussianCodebook(3).levels[size_t(i)], 2e-3);
  EXPECT_THROW(SphereCodebook(2, 3), Error);
  EXPECT_THROW(SphereCodebook(64, 5), Error);
}

// Encode (table + walk) == #{thresholds < x} for every codebook, including an irregular one with
// a tiny gap, at thresholds exactly, just beside them, far outside, and at NaN.
TEST(CodebookTest, EncodeEqualsThresholdCount) {
  const Codebook odd = CodebookFromLevels({-5.0f, -4.999f, -1.0f, 0.0f, 0.001f, 3.0f, 70.0f});
  SplitMix64 rng(17);
  for (const Codebook* cb :
       {&GaussianCodebook(1), &GaussianCodebook(2), &GaussianCodebook(3), &GaussianCodebook(4),
        &GaussianCodebook(8), &TernaryCodebook(), &odd}) {
    std::vector<float> probes = {-1e30f, 1e30f, 0.0f, -0.0f};
    for (float t : cb->thresholds) {
      probes.push_back(t);
      probes.push_back(std::nextafter(t, 1e30f));
      probes.push_back(std::nextafter(t, -1e30f));
    }
    for (int i = 0; i < 20000; ++i) probes.push_back(float(rng.Normal() * 3));
    for (float x : probes) {
      int count = 0;
      for (float t : cb->thresholds) count += t < x;
      ASSERT_EQ(cb->Encode(x), count) << x;
    }
    EXPECT_EQ(cb->Encode(NAN), 0);
    Codebook no_table = *cb;
    no_table.lut.clear();
    for (float x : probes) ASSERT_EQ(no_table.Encode(x), cb->Encode(x)) << x;
  }
}

TEST(CodebookTest, FromLevelsValidates) {
  const Codebook cb = CodebookFromLevels({-1.0f, 0.5f, 2.0f});
  ASSERT_EQ(cb.thresholds.size(), 2u);
  EXPECT_FLOAT_EQ(cb.thresholds[0], -0.25f);
  EXPECT_FLOAT_EQ(cb.thresholds[1], 1.25f);
  EXPECT_THROW(CodebookFromLevels({1.0f}), Error);
  EXPECT_THROW(CodebookFromLevels({1.0f, 1.0f}), Error);
  EXPECT_THROW(CodebookFromLevels({0.0f, NAN}), Error);
  EXPECT_THROW(CodebookFromLevels(std::vector<float>(257, 0.0f)), Error);
  EXPECT_THROW(GaussianCodebook(5), Error);
}

}  // namespace
}  // namespace tq::quant
