#include "quant/hadamard.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "gaussian.h"
#include "quant/hadamard_blocks.h"

namespace tq::quant {
namespace {

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
    const std::vector<float> x = Gaussian(n, uint64_t(n));
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
    const std::vector<float> x = Gaussian(n, 7);
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
  const std::vector<float> x = Gaussian(n, 3);
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
    const std::vector<float> x = Gaussian(n, uint64_t(n) + 1);
    std::vector<float> y = x;
    rot.Forward(y.data());
    EXPECT_NEAR(Norm2(y), Norm2(x), 1e-5 * Norm2(x)) << n;
    rot.Inverse(y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[size_t(i)], x[size_t(i)], 1e-5) << n;
  }
}

// W x == W' (R x) with W' = W Rᵀ (rows rotated forward), and InverseRows undoes ForwardRows.
void ExpectRotatedWeightsPreserveMatvec(const HadamardRotation& rot, int64_t out) {
  const int64_t in = rot.dim();
  const std::vector<float> w = Gaussian(out * in, 5);
  const std::vector<float> x = Gaussian(in, 6);
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

TEST(HadamardTest, RotatedWeightsPreserveMatvec) {
  for (int64_t in : {96, 1408, 512})
    ExpectRotatedWeightsPreserveMatvec(HadamardRotation::Make(in, 99), 37);
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
  EXPECT_NO_THROW(RotateForward(s, 24, x.data()));      // 12 x 2 (turboquant-mlx's blocks)
  EXPECT_THROW(RotateForward(s, 6, x.data()), Error);   // not m x 2^k, m in {1, 12, 20, 28}
  EXPECT_THROW(RotateForward(s, 36, x.data()), Error);  // 36 = 9 x 4: no H_9
  EXPECT_THROW(HadamardRotation(s, 0), Error);
}

TEST(HadamardTest, BlocksOfTwelveTwentyTwentyEight) {
  EXPECT_TRUE(IsHadamardBlock(96));  // 12 x 8
  EXPECT_EQ(HadamardBlockFactor(96), 12);
  EXPECT_EQ(HadamardBlockFactor(320), 20);
  EXPECT_EQ(HadamardBlockFactor(56), 28);
  EXPECT_EQ(HadamardBlockFactor(64), 1);
  EXPECT_EQ(HadamardBlockFactor(12), 12);
  for (int64_t b : {0, -8, 3, 36, 48 * 3, 60}) EXPECT_FALSE(IsHadamardBlock(b)) << b;
  EXPECT_THROW(SmallHadamard(16), Error);
  EXPECT_THROW(HadamardBlockTransform(nullptr, 36), Error);
}

// H_m Hᵀ_m = m I: the stored tables are Hadamard matrices (a flipped entry breaks two rows).
TEST(HadamardTest, SmallMatricesAreOrthogonal) {
  for (int64_t m : {12, 20, 28}) {
    const std::span<const int8_t> h = SmallHadamard(m);
    ASSERT_EQ(int64_t(h.size()), m * m);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        int64_t dot = 0;
        for (int64_t k = 0; k < m; ++k) dot += h[size_t(i * m + k)] * h[size_t(j * m + k)];
        ASSERT_EQ(dot, i == j ? m : 0) << "m=" << m << " rows " << i << ", " << j;
      }
  }
  // mx.hadamard_transform's H_12 starts "+-++++++++++" / "--+-+-+-+-+-".
  const std::span<const int8_t> h12 = SmallHadamard(12);
  EXPECT_EQ(h12[0], 1);
  EXPECT_EQ(h12[1], -1);
  EXPECT_EQ(h12[12], -1);
  EXPECT_EQ(h12[13], -1);
  EXPECT_EQ(h12[14], 1);
}

// H_b = H_m ⊗ H_p (b = m p, index j p + i), entry by entry, and its transpose.
TEST(HadamardTest, BlockTransformIsTheKroneckerProduct) {
  for (int64_t b : {12, 24, 96, 20, 80, 28, 112}) {
    const int64_t m = HadamardBlockFactor(b), p = b / m;
    const std::span<const int8_t> h = SmallHadamard(m);
    const std::vector<float> x = Gaussian(b, uint64_t(b));
    for (bool transpose : {false, true}) {
      std::vector<float> y = x;
      HadamardBlockTransform(y.data(), b, transpose);
      for (int64_t r = 0; r < b; ++r) {
        double ref = 0;
        for (int64_t c = 0; c < b; ++c) {
          const int64_t hm =
              transpose ? h[size_t((c / p) * m + r / p)] : h[size_t((r / p) * m + c / p)];
          const int64_t hp = std::popcount(uint64_t((r % p) & (c % p))) % 2 ? -1 : 1;
          ref += double(hm * hp) * x[size_t(c)];
        }
        ASSERT_NEAR(y[size_t(r)], ref, 1e-4 * std::sqrt(double(b))) << "b=" << b << " r=" << r;
      }
    }
  }
}

TEST(HadamardTest, NonPowerOfTwoBlocksAreOrthogonalRotations) {
  for (auto [n, b] : {std::pair<int64_t, int64_t>{2880, 320}, {96, 96}, {1344, 448}, {96, 24}}) {
    const HadamardRotation rot(HadamardSigns::Generate(n, 5), b);
    const std::vector<float> x = Gaussian(n, uint64_t(n) + 2);
    std::vector<float> y = x;
    rot.Forward(y.data());
    EXPECT_NEAR(Norm2(y), Norm2(x), 1e-5 * Norm2(x)) << n;
    rot.Inverse(y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[size_t(i)], x[size_t(i)], 1e-5) << n;
    ExpectRotatedWeightsPreserveMatvec(rot, 5);
  }
}

}  // namespace
}  // namespace tq::quant
