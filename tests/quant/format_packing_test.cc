#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "quant/format.h"
#include "quant/packing.h"
#include "quant/rng.h"

namespace tq::quant {
namespace {

constexpr CodeFormat kAllFormats[] = {CodeFormat::kQ1, CodeFormat::kQ2, CodeFormat::kQ3,
                                      CodeFormat::kQ4, CodeFormat::kQ8, CodeFormat::kTernary};

TEST(FormatTest, TraitsLookups) {
  for (CodeFormat f : kAllFormats) {
    EXPECT_EQ(Traits(f).format, f);
    EXPECT_EQ(FormatFromName(Traits(f).name), f);
    EXPECT_EQ(FormatForLevels(Traits(f).levels), f);
  }
  EXPECT_EQ(FormatForBits(3), CodeFormat::kQ3);
  EXPECT_EQ(FormatForBits(8), CodeFormat::kQ8);
  EXPECT_FALSE(FormatForBits(5).has_value());
  EXPECT_FALSE(FormatForLevels(5).has_value());
  EXPECT_FALSE(FormatFromName("q5").has_value());
  EXPECT_DOUBLE_EQ(Traits(CodeFormat::kTernary).bits_per_code, 1.6);
}

TEST(PackingTest, PackedBytes) {
  EXPECT_EQ(PackedBytes(CodeFormat::kQ4, 0), 0u);
  EXPECT_EQ(PackedBytes(CodeFormat::kQ4, 1), 16u);
  EXPECT_EQ(PackedBytes(CodeFormat::kQ4, 64), 32u);
  EXPECT_EQ(PackedBytes(CodeFormat::kQ3, 4096), 4096u * 3 / 8);
  EXPECT_EQ(PackedBytes(CodeFormat::kQ2, 33), 16u);
  EXPECT_EQ(PackedBytes(CodeFormat::kQ1, 32), 4u);
  EXPECT_EQ(PackedBytes(CodeFormat::kQ8, 31), 32u);
  EXPECT_EQ(PackedBytes(CodeFormat::kTernary, 160), 32u);
  EXPECT_EQ(PackedBytes(CodeFormat::kTernary, 161), 33u);
  EXPECT_EQ(PackedBytes(CodeFormat::kTernary, 4096), 820u);  // ceil(4096 / 5)
}

// Every length from 0 to three units plus one, random codes: unpack(pack(c)) == c, every output
// byte is written (a poisoned buffer changes nothing), nothing past PackedBytes is touched.
TEST(PackingTest, RoundTripEveryLength) {
  SplitMix64 rng(1);
  for (CodeFormat f : kAllFormats) {
    const int levels = Traits(f).levels;
    const int64_t max_n = 3 * Traits(f).codes_per_unit + 1;
    for (int64_t n = 0; n <= max_n; ++n) {
      std::vector<uint8_t> codes(size_t(n) + 1);
      for (auto& c : codes) c = uint8_t(rng.Next() % uint64_t(levels));
      const size_t bytes = PackedBytes(f, n);
      std::vector<uint8_t> a(bytes + 8, 0x00), b(bytes + 8, 0xff);
      PackCodes(f, codes.data(), n, a.data());
      PackCodes(f, codes.data(), n, b.data());
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(a[i], b[i]) << Traits(f).name << " n=" << n;
      for (size_t i = bytes; i < bytes + 8; ++i) ASSERT_EQ(b[i], 0xff) << Traits(f).name;
      std::vector<uint8_t> out(size_t(n) + 1, 0xee);
      UnpackCodes(f, a.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[size_t(i)], codes[size_t(i)]) << Traits(f).name << " n=" << n << " i=" << i;
      ASSERT_EQ(out[size_t(n)], 0xee) << "wrote past n";
    }
  }
}

TEST(PackingTest, RejectsOutOfRangeCodes) {
  for (CodeFormat f : kAllFormats) {
    if (Traits(f).levels == 256) continue;
    std::vector<uint8_t> codes(40, 0);
    codes[37] = uint8_t(Traits(f).levels);
    std::vector<uint8_t> out(PackedBytes(f, 40));
    try {
      PackCodes(f, codes.data(), 40, out.data());
      FAIL() << "no error for " << Traits(f).name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("index 37"), std::string::npos) << e.what();
    }
  }
}

// The documented bit layouts (docs/FORMAT.md), checked on single codes.
TEST(PackingTest, DocumentedLayouts) {
  std::vector<uint8_t> codes(32, 0), out(32);
  auto pack_one = [&](CodeFormat f, int index, uint8_t value) {
    std::fill(codes.begin(), codes.end(), 0);
    codes[size_t(index)] = value;
    std::fill(out.begin(), out.end(), 0);
    PackCodes(f, codes.data(), 32, out.data());
  };
  pack_one(CodeFormat::kQ4, 3, 0xA);
  EXPECT_EQ(out[3], 0x0A);
  pack_one(CodeFormat::kQ4, 19, 0xB);  // c[j+16] in the high nibble of byte j
  EXPECT_EQ(out[3], 0xB0);
  pack_one(CodeFormat::kQ2, 21, 3);  // c[j+16] in bits 4-5 of byte j
  EXPECT_EQ(out[5], 0x30);
  pack_one(CodeFormat::kQ2, 30, 2);  // c[j+24] in bits 6-7
  EXPECT_EQ(out[6], 0x80);
  pack_one(CodeFormat::kQ3, 13, 6);  // low bits 2 -> byte 5 bits 2-3; high bit -> bit 13 of hi
  EXPECT_EQ(out[5], 0x08);
  EXPECT_EQ(out[8 + 1], 0x20);
  pack_one(CodeFormat::kQ1, 26, 1);
  EXPECT_EQ(out[3], 0x04);
  pack_one(CodeFormat::kQ8, 31, 200);
  EXPECT_EQ(out[31], 200);
  // Ternary: byte j of a 160-chunk holds t[j], t[j+32], ..., t[j+128] (t[j] most significant).
  std::vector<uint8_t> trits(160, 0), packed(32);
  trits[7] = 2;    // digit 0 of byte 7
  trits[135] = 1;  // digit 4 of byte 7
  PackCodes(CodeFormat::kTernary, trits.data(), 160, packed.data());
  EXPECT_EQ(packed[7], uint8_t((163 * 256 + 242) / 243));  // V = 2*81 + 1
  EXPECT_EQ(packed[6], 0);
}

// All 243 trit tuples survive the division-free decoder, and the byte order is monotone in V.
TEST(PackingTest, TernaryByteExhaustive) {
  int prev = -1;
  for (int v = 0; v < 243; ++v) {
    uint8_t t[5], back[5];
    for (int k = 4, x = v; k >= 0; --k, x /= 3) t[k] = uint8_t(x % 3);
    const uint8_t q = PackTrits5(t);
    EXPECT_GT(int(q), prev);
    prev = q;
    UnpackTrits5(q, back);
    for (int k = 0; k < 5; ++k) ASSERT_EQ(back[k], t[k]) << "v=" << v << " k=" << k;
  }
}

// Any bytes (a hostile file) unpack to in-range codes, so codebook lookups stay in bounds.
TEST(PackingTest, ArbitraryBytesGiveValidCodes) {
  SplitMix64 rng(9);
  for (CodeFormat f : kAllFormats) {
    const int64_t n = 1000;
    std::vector<uint8_t> packed(PackedBytes(f, n)), codes(static_cast<size_t>(n));
    for (int rep = 0; rep < 20; ++rep) {
      for (auto& b : packed) b = uint8_t(rep == 0 ? 0xff : rng.Next());
      UnpackCodes(f, packed.data(), n, codes.data());
      for (uint8_t c : codes) ASSERT_LT(int(c), Traits(f).levels) << Traits(f).name;
    }
  }
  for (int q = 0; q < 256; ++q) {
    uint8_t t[5];
    UnpackTrits5(uint8_t(q), t);
    for (uint8_t v : t) ASSERT_LE(v, 2) << q;
  }
}

TEST(PackingTest, TernaryShortChunkUsesCeilBytes) {
  // 7 trits: B = 2 bytes; byte 0 holds t0, t2, t4, t6; byte 1 holds t1, t3, t5.
  const uint8_t trits[7] = {1, 2, 0, 1, 2, 0, 1};
  uint8_t packed[2];
  PackCodes(CodeFormat::kTernary, trits, 7, packed);
  uint8_t d0[5], d1[5];
  UnpackTrits5(packed[0], d0);
  UnpackTrits5(packed[1], d1);
  EXPECT_EQ(d0[0], 1);
  EXPECT_EQ(d0[1], 0);
  EXPECT_EQ(d0[2], 2);
  EXPECT_EQ(d0[3], 1);
  EXPECT_EQ(d0[4], 0);
  EXPECT_EQ(d1[0], 2);
  EXPECT_EQ(d1[1], 1);
  EXPECT_EQ(d1[2], 0);
  EXPECT_EQ(d1[3], 0);
}

}  // namespace
}  // namespace tq::quant
