#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tq {
namespace {

// Reference fp32 -> fp16 by exhaustive nearest search would be slow; instead check that every
// fp16 value round-trips and that midpoints round to even.
TEST(Half, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
      continue;
    }
    EXPECT_EQ(F32ToF16(f), uint16_t(h)) << "h=" << h;
  }
}

TEST(Half, Bf16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToF32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToBf16(f), uint16_t(h));
  }
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(65504.f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.f), 0x7c00);  // halfway to inf rounds up
  EXPECT_EQ(F32ToF16(1e10f), 0x7c00);
  EXPECT_EQ(F32ToF16(-1e10f), 0xfc00);
  // 1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even (1.0).
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Smallest subnormal 2^-24, and values around half of it.
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Half, RandomValuesAreNearest) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-70000.f, 70000.f);
  for (int i = 0; i < 200000; ++i) {
    const float f = i % 2 ? u(rng) : u(rng) * 1e-6f;
    const uint16_t h = F32ToF16(f);
    const float back = F16ToF32(h);
    if (std::isinf(back)) {
      EXPECT_GE(std::fabs(f), 65504.f);
      continue;
    }
    // The neighbours of h are no closer.
    const float up = F16ToF32(uint16_t(h + 1)), down = F16ToF32(uint16_t(h - 1));
    if (!std::isnan(up) && !std::isinf(up)) {
      EXPECT_LE(std::fabs(back - f), std::fabs(up - f));
    }
    if (h != 0 && h != 0x8000 && !std::isnan(down)) {
      EXPECT_LE(std::fabs(back - f), std::fabs(down - f));
    }
  }
}

TEST(Half, BulkMatchesScalar) {
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0, 3);
  std::vector<float> x(1003);
  for (auto& v : x) v = n(rng);
  std::vector<uint16_t> h(x.size()), b(x.size());
  std::vector<float> y(x.size()), z(x.size());
  F32ToF16(x.data(), h.data(), x.size());
  F32ToBf16(x.data(), b.data(), x.size());
  F16ToF32(h.data(), y.data(), x.size());
  Bf16ToF32(b.data(), z.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], F32ToF16(x[i]));
    EXPECT_EQ(b[i], F32ToBf16(x[i]));
    EXPECT_EQ(y[i], F16ToF32(h[i]));
    EXPECT_EQ(z[i], Bf16ToF32(b[i]));
  }
}

}  // namespace
}  // namespace tq
