// The CUDA kernels' packed-code decoder (kernels/cuda/code_at.h, the same source nvcc compiles
// for the device) against quant::UnpackCodes, on the host: every format, row lengths around the
// unit and ternary-chunk edges. Runs in every build (no GPU needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cuda/code_at.h"
#include "quant/format.h"
#include "quant/packing.h"

namespace tq::kernels {
namespace {

TEST(CudaCodeAt, MatchesUnpackCodes) {
  std::mt19937 rng(5);
  for (int f = 0; f < quant::kNumCodeFormats; ++f) {
    const auto format = static_cast<quant::CodeFormat>(f);
    const int levels = quant::Traits(format).levels;
    for (int64_t n : {1, 5, 31, 32, 33, 64, 96, 159, 160, 161, 165, 320, 352, 481, 640, 1408}) {
      std::vector<uint8_t> codes(static_cast<size_t>(n)), back(codes.size());
      for (auto& c : codes) c = uint8_t(rng() % uint32_t(levels));
      std::vector<uint8_t> packed(quant::PackedBytes(format, n));
      quant::PackCodes(format, codes.data(), n, packed.data());
      quant::UnpackCodes(format, packed.data(), n, back.data());
      ASSERT_EQ(back, codes);
      for (int64_t c = 0; c < n; ++c)
        ASSERT_EQ(cuda::CodeAt(f, packed.data(), c, n), codes[size_t(c)])
            << quant::Traits(format).name << " n=" << n << " code " << c;
    }
  }
}

// The device encoder's packer (PackedUnitByte, kernels/cuda/kv_encode.cu) writes PackCodes's
// bytes, partial last units included.
TEST(CudaCodeAt, PackedUnitByteMatchesPackCodes) {
  std::mt19937 rng(6);
  for (int f = 0; f < quant::kNumCodeFormats; ++f) {
    const auto format = static_cast<quant::CodeFormat>(f);
    if (format == quant::CodeFormat::kTernary) continue;  // not a 32-code unit format
    const int levels = quant::Traits(format).levels;
    ASSERT_EQ(cuda::UnitBytes(f), quant::Traits(format).bytes_per_unit);
    for (int64_t n : {1, 5, 31, 32, 33, 40, 64, 96, 100, 128, 256}) {
      std::vector<uint8_t> codes(static_cast<size_t>(n));
      for (auto& c : codes) c = uint8_t(rng() % uint32_t(levels));
      std::vector<uint8_t> want(quant::PackedBytes(format, n));
      quant::PackCodes(format, codes.data(), n, want.data());
      const int ub = cuda::UnitBytes(f);
      for (size_t b = 0; b < want.size(); ++b) {
        const int64_t u = int64_t(b) / ub;
        const int avail = int(std::min<int64_t>(32, n - 32 * u));
        ASSERT_EQ(cuda::PackedUnitByte(f, codes.data() + 32 * u, avail, int(b % size_t(ub))),
                  want[b])
            << quant::Traits(format).name << " n=" << n << " byte " << b;
      }
    }
  }
}

TEST(CudaCodeAt, FormatNumbersAreQuantsOwn) {
  EXPECT_EQ(cuda::kQ1, int(quant::CodeFormat::kQ1));
  EXPECT_EQ(cuda::kQ2, int(quant::CodeFormat::kQ2));
  EXPECT_EQ(cuda::kQ3, int(quant::CodeFormat::kQ3));
  EXPECT_EQ(cuda::kQ4, int(quant::CodeFormat::kQ4));
  EXPECT_EQ(cuda::kQ8, int(quant::CodeFormat::kQ8));
  EXPECT_EQ(cuda::kTernary, int(quant::CodeFormat::kTernary));
}

}  // namespace
}  // namespace tq::kernels
