#include "quant/hadamard.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "quant/rng.h"

namespace tq::quant {
namespace {

std::vector<float> RandomVector(int64_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = float(rng.Normal());
  return x;
}

double Norm2(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += double(v) * v;
  return s;
}

TEST(HadamardTest, BlockSize) {
  EXPECT_EQ(HadamardBlockSize(1408), 128);
  EXPECT_EQ(HadamardBlockSize(96), 32);
  EXPECT_EQ(HadamardBlockSize(14336), 2048);
  EXPECT_EQ(HadamardBlockSize(18944), 512);
  EXPECT_EQ(HadamardBlockSize(4096), 4096);
  EXPECT_EQ(HadamardBlockSize(8192), 4096);
  EXPECT_EQ(HadamardBlockSize(8192, 1024), 1024);
  EXPECT_EQ(HadamardBlockSize(8192, 1000), 512);  // cap rounded down to a power of two
  EXPECT_EQ(HadamardBlockSize(7), 1);
  EXPECT_THROW(HadamardBlockSize(0), Error);
}

// Against the explicit Sylvester matrix, entry (i, j) = (-1)^popcount(i & j).
TEST(HadamardTest, FwhtMatchesSylvesterMatrix) {
  for (int64_t n : {1, 2, 4, 8, 64, 256}) {
    const std::vector<float> x = RandomVector(n, uint64_t(n));
    std::vector<float> y = x;
    Fwht(y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double ref = 0;
      for (int64_t j = 0; j < n; ++j)
        ref += (std::popcount(uint64_t(i & j)) % 2 ? -1.0 : 1.0) * x[size_t(j)];
      ASSERT_NEAR(y[size_t(i)], ref, 1e-4 * std::sqrt(double(n))) << "n=" << n << " i=" << i;
    }
  }
}

TEST(HadamardTest, FwhtOrthonormalKeepsNormAndIsInvolution) {
  for (int64_t n : {2, 32, 1024, 4096}) {
    const std::vector<float> x = RandomVector(n, 7);
    std::vector<float> y = x;
    FwhtOrthonormal(y.data(), n);
    EXPECT_NEAR(Norm2(y), Norm2(x), 1e-5 * Norm2(x));
    FwhtOrthonormal(y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[size_t(i)], x[size_t(i)], 1e-5);
  }
}

// R = blockdiag(H_b) diag(s) / √b, checked entry by entry on a non-power-of-two dimension.
TEST(HadamardTest, RotationMatchesExplicitMatrix) {
  const int64_t n = 96, b = HadamardBlockSize(n);
  ASSERT_EQ(b, 32);
  const HadamardSigns s = HadamardSigns::Generate(n, 42);
  const std::vector<float> x = RandomVector(n, 3);
  std::vector<float> y = x;
  RotateForward(s, b, y.data());
  for (int64_t i = 0; i < n; ++i) {
    double ref = 0;
    const int64_t blk = i / b * b;
    for (int64_t j = blk; j < blk + b; ++j) {
      const double h = std::popcount(uint64_t((i - blk) & (j - blk))) % 2 ? -1.0 : 1.0;
      ref += h * s[j] * x[size_t(j)];
    }
    ASSERT_NEAR(y[size_t(i)], ref / std::sqrt(double(b)), 1e-5) << i;
  }
}

TEST(HadamardTest, ForwardInverseAndNorm) {
  for (int64_t n : {96, 512, 1408, 14336, 18944}) {
    const HadamardRotation rot = HadamardRotation::Make(n, 1234);
    const std::vector<float> x = RandomVector(n, uint64_t(n) + 1);
    std::vector<float> y = x;
    rot.Forward(y.data());
    EXPECT_NEAR(Norm2(y), Norm2(x), 1e-5 * Norm2(x)) << n;
    rot.Inverse(y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[size_t(i)], x[size_t(i)], 1e-5) << n;
  }
}

// W x == W' (R x) with W' = W Rᵀ (rows rotated forward).
TEST(HadamardTest, RotatedWeightsPreserveMatvec) {
  for (int64_t in : {96, 1408, 512}) {
    const int64_t out = 37;
    const HadamardRotation rot = HadamardRotation::Make(in, 99);
    const std::vector<float> w = RandomVector(out * in, 5);
    const std::vector<float> x = RandomVector(in, 6);
    std::vector<float> w2 = w, x2 = x;
    rot.ForwardRows(w2.data(), out);
    rot.Forward(x2.data());
    for (int64_t r = 0; r < out; ++r) {
      double y = 0, y2 = 0;
      for (int64_t c = 0; c < in; ++c) {
        y += double(w[size_t(r * in + c)]) * x[size_t(c)];
        y2 += double(w2[size_t(r * in + c)]) * x2[size_t(c)];
      }
      ASSERT_NEAR(y2, y, 1e-4 * std::sqrt(double(in))) << "in=" << in << " row=" << r;
    }
    rot.InverseRows(w2.data(), out);
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(w2[i], w[i], 1e-5);
  }
}

TEST(HadamardTest, SignsAreDeterministicAndDocumented) {
  // SplitMix64 reference value: the first output for seed 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafull);
  // s_i = -1 iff bit (i mod 64) of output i/64 is set.
  const HadamardSigns s = HadamardSigns::Generate(130, 0);
  SplitMix64 ref(0);
  const uint64_t w0 = ref.Next(), w1 = ref.Next(), w2 = ref.Next();
  for (int i = 0; i < 130; ++i) {
    const uint64_t w = i < 64 ? w0 : i < 128 ? w1 : w2;
    ASSERT_EQ(s[i], (w >> (i % 64) & 1) ? -1 : 1) << i;
  }
  EXPECT_EQ(s, HadamardSigns::Generate(130, 0));
  EXPECT_NE(s, HadamardSigns::Generate(130, 1));
  // Roughly balanced.
  const HadamardSigns big = HadamardSigns::Generate(1 << 16, 77);
  int64_t sum = 0;
  for (int64_t i = 0; i < big.size(); ++i) sum += big[i];
  EXPECT_LT(std::abs(sum), 1500);
}

TEST(HadamardTest, SignBitsRoundTripAndValidation) {
  for (int64_t n : {0, 1, 7, 8, 9, 96, 1408}) {
    const HadamardSigns s = HadamardSigns::Generate(n, uint64_t(n));
    const std::vector<uint8_t> bits = s.ToBits();
    EXPECT_EQ(bits.size(), size_t((n + 7) / 8));
    EXPECT_EQ(HadamardSigns::FromBits(bits, n), s);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bool(bits[size_t(i / 8)] >> (i % 8) & 1), s[i] < 0);
  }
  const std::vector<uint8_t> three = {0xff, 0x01};
  EXPECT_THROW(HadamardSigns::FromBits(three, 8), Error);  // wrong byte count
  const std::vector<uint8_t> padded = {0xff, 0x04};
  EXPECT_THROW(HadamardSigns::FromBits(padded, 10), Error);  // padding bit 10 set
  EXPECT_NO_THROW(HadamardSigns::FromBits(three, 10));
  const std::vector<int8_t> bad = {1, -1, 0};
  EXPECT_THROW(HadamardSigns::FromInt8(bad), Error);
  const std::vector<int8_t> good = {1, -1, -1};
  EXPECT_EQ(HadamardSigns::FromInt8(good)[2], -1);
}

TEST(HadamardTest, RejectsBadBlocks) {
  const HadamardSigns s = HadamardSigns::Generate(96, 1);
  std::vector<float> x(96);
  EXPECT_THROW(RotateForward(s, 64, x.data()), Error);  // 64 does not divide 96
  EXPECT_THROW(RotateForward(s, 24, x.data()), Error);  // not a power of two
  EXPECT_THROW(HadamardRotation(s, 0), Error);
}

}  // namespace
}  // namespace tq::quant
