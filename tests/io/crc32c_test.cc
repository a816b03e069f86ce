// CRC-32C: the standard check value, both paths against a bit-at-a-time reference on random
// lengths and alignments, chaining, and files (empty, missing).
#include "io/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

uint32_t BitwiseReference(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

TEST(Crc32c, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(0, s, 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(0, s, 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(0, s, 0), 0u);
  EXPECT_EQ(Crc32cHex(0xE3069283u), "0xe3069283");
}

TEST(Crc32c, BothPathsMatchTheReferenceAndChain) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(5000);
  for (auto& b : buf) b = uint8_t(rng());
  for (int trial = 0; trial < 200; ++trial) {
    const size_t off = rng() % 16, n = rng() % (buf.size() - 16);
    const uint32_t want = BitwiseReference(buf.data() + off, n);
    EXPECT_EQ(Crc32c(0, buf.data() + off, n), want) << off << " " << n;
    EXPECT_EQ(Crc32cPortable(0, buf.data() + off, n), want) << off << " " << n;
    const size_t cut = n ? rng() % n : 0;
    EXPECT_EQ(Crc32c(Crc32c(0, buf.data() + off, cut), buf.data() + off + cut, n - cut), want);
  }
}

TEST(Crc32c, Files) {
  test::TempDir dir;
  test::WriteFile(dir.file("a"), "123456789");
  uint64_t size = 0;
  EXPECT_EQ(Crc32cOfFile(dir.file("a"), &size), 0xE3069283u);
  EXPECT_EQ(size, 9u);
  test::WriteFile(dir.file("empty"), "");
  EXPECT_EQ(Crc32cOfFile(dir.file("empty"), &size), 0u);
  EXPECT_EQ(size, 0u);
  EXPECT_THROW(Crc32cOfFile(dir.file("missing")), Error);
}

}  // namespace
}  // namespace tq
