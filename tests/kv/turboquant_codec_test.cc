// KvVectorCodec: storage sizes, distortion against the Lloyd-Max tables, the MSE-optimal scale and
// the sphere codebook never worse than their plain counterparts, bad widths rejected.
#include "kv/turboquant_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/hadamard.h"

namespace tq {
namespace {

TEST(KvCodec, ValidBits) {
  for (double b : {2.0, 2.5, 3.0, 3.5, 4.0, 8.0}) EXPECT_TRUE(IsValidKvBits(b)) << b;
  for (double b : {0.0, 1.0, 5.0, 3.25, 16.0, -4.0}) EXPECT_FALSE(IsValidKvBits(b)) << b;
  EXPECT_THROW(KvVectorCodec(64, 5, KvScale::kNorm, KvCodebook::kGaussian), Error);
  EXPECT_THROW(KvVectorCodec(0, 4, KvScale::kNorm, KvCodebook::kGaussian), Error);
}

TEST(KvCodec, StorageSizes) {
  const std::pair<double, int64_t> cases[] = {{2, 16},   {2.5, 20}, {3, 24},
                                              {3.5, 28}, {4, 32},   {8, 64}};
  for (auto [bits, bytes] : cases) {
    KvVectorCodec c(64, bits, KvScale::kNorm, KvCodebook::kGaussian);
    EXPECT_EQ(c.code_bytes(), bytes) << bits;
    EXPECT_EQ(c.groups(), 1);
  }
  EXPECT_EQ(KvVectorCodec(256, 4, KvScale::kNorm, KvCodebook::kGaussian).groups(), 2);
  EXPECT_EQ(KvScaleGroup(128), 128);
  EXPECT_EQ(KvScaleGroup(96), 32);
}

// Mean relative squared error ‖x - x̂‖² / ‖x‖² over random rotated Gaussian vectors.
double Distortion(const KvVectorCodec& c, int count, uint64_t seed) {
  const int64_t d = c.dim();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  const auto rot = quant::HadamardRotation::Make(d, seed, d);
  std::vector<float> x(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  std::vector<uint8_t> codes(static_cast<size_t>(c.code_bytes()));
  std::vector<uint16_t> scales(static_cast<size_t>(c.groups()));
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    for (auto& e : x) e = normal(rng) * 3.0f;
    x[0] += 10.0f;  // an outlier channel: the rotation must spread it
    rot.Forward(x.data());
    c.Encode(x.data(), codes.data(), scales.data());
    c.Decode(codes.data(), scales.data(), y.data());
    double err = 0, norm = 0;
    for (int64_t j = 0; j < d; ++j) {
      err += (x[static_cast<size_t>(j)] - y[static_cast<size_t>(j)]) *
             double(x[static_cast<size_t>(j)] - y[static_cast<size_t>(j)]);
      norm += x[static_cast<size_t>(j)] * double(x[static_cast<size_t>(j)]);
    }
    sum += err / norm;
  }
  return sum / count;
}

TEST(KvCodec, DistortionMatchesLloydMax) {
  // Lloyd-Max MSE of N(0,1) at 2/3/4 bits; at d = 128 the rotated coordinates are close to it.
  const std::pair<double, double> table[] = {{2, 0.1175}, {3, 0.03455}, {4, 0.009497}};
  for (auto [bits, mse] : table) {
    const double got =
        Distortion(KvVectorCodec(128, bits, KvScale::kNorm, KvCodebook::kGaussian), 400, 7);
    EXPECT_NEAR(got, mse, 0.15 * mse) << bits << " bits";
  }
  EXPECT_LT(Distortion(KvVectorCodec(64, 8, KvScale::kNorm, KvCodebook::kGaussian), 200, 7), 2e-4);
  // Fractional widths sit between their neighbours.
  const double d3 = Distortion(KvVectorCodec(64, 3, KvScale::kNorm, KvCodebook::kGaussian), 300, 3);
  const double d35 =
      Distortion(KvVectorCodec(64, 3.5, KvScale::kNorm, KvCodebook::kGaussian), 300, 3);
  const double d4 = Distortion(KvVectorCodec(64, 4, KvScale::kNorm, KvCodebook::kGaussian), 300, 3);
  EXPECT_LT(d35, d3);
  EXPECT_GT(d35, d4);
}

TEST(KvCodec, MseScaleAndSphereCodebookHelp) {
  for (double bits : {2.0, 3.0, 4.0}) {
    const double plain =
        Distortion(KvVectorCodec(64, bits, KvScale::kNorm, KvCodebook::kGaussian), 300, 11);
    const double mse =
        Distortion(KvVectorCodec(64, bits, KvScale::kMse, KvCodebook::kGaussian), 300, 11);
    const double sphere =
        Distortion(KvVectorCodec(64, bits, KvScale::kNorm, KvCodebook::kSphere), 300, 11);
    EXPECT_LE(mse, plain) << bits;
    EXPECT_LT(sphere, plain * 1.01) << bits;
  }
}

// Mean of x̂·x / ‖x‖²: the reconstruction's shrink along x.
double Projection(const KvVectorCodec& c, int count) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(64), y(64);
  std::vector<uint8_t> codes(static_cast<size_t>(c.code_bytes()));
  uint16_t scale;
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    for (auto& e : x) e = normal(rng);
    c.Encode(x.data(), codes.data(), &scale);
    c.Decode(codes.data(), &scale, y.data());
    double xy = 0, xx = 0;
    for (size_t j = 0; j < 64; ++j) xy += x[j] * double(y[j]), xx += x[j] * double(x[j]);
    sum += xy / xx;
  }
  return sum / count;
}

TEST(KvCodec, UnbiasedScaleRemovesTheShrink) {
  const double norm = Projection(KvVectorCodec(64, 2, KvScale::kNorm, KvCodebook::kGaussian), 300);
  const double unb =
      Projection(KvVectorCodec(64, 2, KvScale::kUnbiased, KvCodebook::kGaussian), 300);
  EXPECT_NEAR(norm, 1 - 0.1175, 0.02);  // Lloyd-Max 2 bits: x̂·x ≈ (1 - mse)‖x‖²
  EXPECT_NEAR(unb, 1.0, 2e-3);
}

TEST(KvCodec, ZeroAndHugeVectors) {
  KvVectorCodec c(64, 4, KvScale::kMse, KvCodebook::kGaussian);
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  std::vector<uint8_t> codes(32);
  uint16_t scale = 0;
  c.Encode(x.data(), codes.data(), &scale);
  c.Decode(codes.data(), &scale, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
  for (auto& e : x) e = 1e6f;
  c.Encode(x.data(), codes.data(), &scale);
  c.Decode(codes.data(), &scale, y.data());
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace tq
