// turboquant-mlx word layouts and Hadamard blocks (io/tqmlx_import.h), against hand-built words.
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/tqmlx_import.h"

namespace tq::tqmlx {
namespace {

TEST(TqMlxWords, ThreeBitTenPerWordLsbFirst) {
  // codes 0..9 -> word = sum c_i << 3i; the top 2 bits are unused (set here: ignored).
  uint32_t w[2] = {0xC0000000u, 0};
  for (uint32_t i = 0; i < 10; ++i) w[0] |= (i % 8) << (3 * i);
  w[1] = 5u | (7u << 3);
  uint8_t c[12];
  UnpackWords(w, 3, 12, c, "test");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c[i], i % 8) << i;
  EXPECT_EQ(c[10], 5);
  EXPECT_EQ(c[11], 7);
}

TEST(TqMlxWords, OneTwoFourBits) {
  const uint32_t w1 = 0x80000001u;
  uint8_t c[32];
  UnpackWords(&w1, 1, 32, c, "test");
  EXPECT_EQ(c[0], 1);
  EXPECT_EQ(c[1], 0);
  EXPECT_EQ(c[31], 1);
  const uint32_t w2 = 0xE4u;  // 0b11100100: codes 0, 1, 2, 3
  UnpackWords(&w2, 2, 4, c, "test");
  EXPECT_EQ(c[0] + 10 * c[1] + 100 * c[2] + 1000 * c[3], 3210);
  const uint32_t w4 = 0xFEDCBA98u;
  UnpackWords(&w4, 4, 8, c, "test");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c[i], 8 + i);
}

TEST(TqMlxWords, TritsTwentyPerWordBaseThree) {
  uint32_t w[2] = {0, 2};
  uint32_t p = 1;
  for (int i = 0; i < 20; ++i, p *= 3) w[0] += uint32_t(i % 3) * p;
  uint8_t c[21];
  UnpackWords(w, 0, 21, c, "test");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c[i], i % 3) << i;
  EXPECT_EQ(c[20], 2);
  const uint32_t bad = 3486784401u;  // 3^20: no 20-trit number
  EXPECT_THROW(UnpackWords(&bad, 0, 5, c, "test"), Error);
  const uint32_t max = 3486784400u;  // 3^20 - 1: all 2s
  UnpackWords(&max, 0, 20, c, "test");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c[i], 2);
}

TEST(TqMlxWords, MlxHadamardBlocks) {
  EXPECT_EQ(MlxHadamardBlock(512), 512);
  EXPECT_EQ(MlxHadamardBlock(1408), 128);     // 11 x 128: ours too
  EXPECT_EQ(MlxHadamardBlock(96), 96);        // 12 x 8: not a power of two
  EXPECT_EQ(MlxHadamardBlock(14336), 14336);  // 28 x 512 (Llama-3-8B's FFN)
  EXPECT_EQ(MlxHadamardBlock(18944), 512);    // 37 x 512
  EXPECT_EQ(MlxHadamardBlock(5120), 5120);    // 20 x 256
  EXPECT_EQ(MlxHadamardBlock(7), 1);
}

TEST(TqMlxWords, DetectionNeedsModeWithoutFormatVersion) {
  EXPECT_TRUE(IsTqMlxConfig(R"({"quantization": {"mode": "turboquant", "bits": 3}})"));
  EXPECT_FALSE(IsTqMlxConfig(R"({"quantization": {"mode": "turboquant", "format_version": 2}})"));
  EXPECT_FALSE(IsTqMlxConfig(R"({"quantization": {"bits": 4, "group_size": 64}})"));  // mlx-lm
  EXPECT_FALSE(IsTqMlxConfig("{not json"));
  EXPECT_FALSE(IsTqMlxConfig("[]"));
  EXPECT_FALSE(IsTqMlxDir("/nonexistent/dir"));
}

}  // namespace
}  // namespace tq::tqmlx
