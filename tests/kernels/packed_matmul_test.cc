// Packed-weight kernels: the cpu path against the scalar oracle, and the oracle against the
// quant/ reference dequantizer, for every format and the affine method on awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"
#include "quant/codebook.h"
#include "quant/packing.h"
#include "quant/quantized_matrix.h"

namespace tq::kernels {
namespace {

using quant::CodeFormat;
using test::Owned;
using test::RandomPacked;

struct Case {
  quant::QuantMethod method;
  CodeFormat format;
};

std::vector<Case> AllCases() {
  std::vector<Case> c;
  for (CodeFormat f : {CodeFormat::kQ1, CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4,
                       CodeFormat::kQ8, CodeFormat::kTernary})
    c.push_back({quant::QuantMethod::kCodebook, f});
  for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8})
    c.push_back({quant::QuantMethod::kAffine, f});
  return c;
}

TEST(PackedKernels, RefDequantizeMatchesQuantReference) {
  for (const Case& c : AllCases()) {
    for (int64_t cols : {32, 96, 160, 352, 1408}) {
      const Owned o = RandomPacked(c.method, c.format, 5, cols, 32, 7);
      std::vector<float> want(size_t(5 * cols)), got(want.size()), fast(want.size());
      quant::Dequantize(o.q, want.data());
      ref::PackedDequantizeRows(o.view, 0, 5, got.data());
      cpu::PackedDequantizeRows(o.view, 0, 5, fast.data());
      ASSERT_EQ(want, got) << quant::Traits(c.format).name << " cols " << cols;
      ASSERT_EQ(want, fast) << quant::Traits(c.format).name << " cols " << cols;
    }
  }
}

TEST(PackedKernels, CpuMatMulMatchesRefOnAwkwardShapes) {
  // The float path only: the int8 decode kernels (few tokens) have their own bounds
  // (fast_packed_decode_test.cc).
  const cpu::Isa saved = cpu::ActiveIsa();
  cpu::SetActiveIsa(cpu::Isa::kScalar);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  const int64_t shapes[][3] = {{1, 32, 32},    {7, 96, 32},    {33, 160, 32},
                               {17, 1408, 64}, {64, 256, 128}, {300, 64, 64}};
  for (const Case& c : AllCases()) {
    for (const auto& s : shapes) {
      const int64_t rows = s[0], cols = s[1], g = s[2];
      const Owned o = RandomPacked(c.method, c.format, rows, cols, g, uint32_t(rows * cols));
      std::vector<float> bias(static_cast<size_t>(rows));
      for (auto& b : bias) b = nd(rng);
      for (int64_t n : {1, 3, 8, 17, 257}) {
        std::vector<float> x(size_t(n * cols));
        for (auto& v : x) v = nd(rng);
        std::vector<float> want(size_t(n * rows)), got(want.size());
        const float* b = (n % 2) ? bias.data() : nullptr;
        ref::PackedMatMul(x.data(), n, o.view, b, want.data());
        cpu::PackedMatMul(x.data(), n, o.view, b, got.data());
        double max_ref = 0;
        for (float v : want) max_ref = std::max(max_ref, double(std::fabs(v)));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4 * (max_ref + 1))
              << quant::Traits(c.format).name
              << (c.method == quant::QuantMethod::kAffine ? " affine" : "") << " [" << rows << ", "
              << cols << "] n=" << n << " at " << i;
      }
    }
  }
  cpu::SetActiveIsa(saved);
}

TEST(PackedKernels, InconsistentViewIsAnError) {
  Owned o = RandomPacked(quant::QuantMethod::kCodebook, CodeFormat::kQ4, 4, 64, 32, 1);
  PackedMatrix v = o.view;
  v.row_bytes += 1;
  std::vector<float> x(64), y(4);
  EXPECT_THROW(cpu::PackedMatMul(x.data(), 1, v, nullptr, y.data()), Error);
  v = o.view;
  v.codebook = nullptr;
  EXPECT_THROW(CheckPackedMatrix(v, "test"), Error);
  v = o.view;
  v.group_size = 48;
  EXPECT_THROW(CheckPackedMatrix(v, "test"), Error);
}

}  // namespace
}  // namespace tq::kernels
