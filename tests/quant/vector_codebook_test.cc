#include "quant/vector_codebook.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "core/error.h"
#include "quant/codebook.h"

namespace tq::quant {
namespace {

// A 2-D codebook at 2 bits per coordinate (small enough for a unit test): lower held-out
// distortion than the scalar Lloyd-Max codebook at the same rate. (At 1 bit per coordinate the
// 4-point optimum in 2-D is the product of the scalar codebook: no gain there.)
TEST(VectorCodebookTest, TwoDimensionalBeatsScalar) {
  for (int bits : {2}) {
    VectorCodebookOptions options;
    options.num_samples = 60000;
    options.iterations = 30;
    const VectorCodebook cb = TrainGaussianVectorCodebook(2, bits, options);
    ASSERT_EQ(cb.size(), 1 << (2 * bits));
    const double held_out = VectorCodebookMse(cb, 100000, 99);
    const double scalar = GaussianCodebook(bits).mse;
    std::printf("2-D vector codebook, %d bits/coord: held-out MSE %.5f vs scalar %.5f (%+.1f%%)\n",
                bits, held_out, scalar, 100 * (held_out / scalar - 1));
    EXPECT_LT(held_out, scalar) << bits;
  }
}

TEST(VectorCodebookTest, ProductStartAndEncode) {
  VectorCodebookOptions options;
  options.iterations = 0;  // the product of the scalar codebook, unchanged
  options.num_samples = 20000;
  const VectorCodebook cb = TrainGaussianVectorCodebook(2, 2, options);
  const Codebook& s = GaussianCodebook(2);
  const float x[2] = {0.3f, -2.0f};
  const float* p = cb.Decode(cb.Encode(x));
  EXPECT_EQ(p[0], s.Decode(s.Encode(x[0])));
  EXPECT_EQ(p[1], s.Decode(s.Encode(x[1])));
  EXPECT_NEAR(VectorCodebookMse(cb, 100000, 5), s.mse, 0.02 * s.mse);
  EXPECT_THROW(TrainGaussianVectorCodebook(9, 1), Error);
  EXPECT_THROW(TrainGaussianVectorCodebook(4, 4), Error);
}

// The larger books take seconds to train: run with --gtest_also_run_disabled_tests to measure.
TEST(VectorCodebookTest, DISABLED_MeasureLargerBooks) {
  struct Case {
    int dim, bits;
  };
  for (const Case c : {Case{2, 3}, Case{4, 1}, Case{4, 2}, Case{3, 3}}) {
    VectorCodebookOptions options;
    options.num_samples = std::max(100000, 100 << (c.dim * c.bits));
    options.iterations = 40;
    const VectorCodebook cb = TrainGaussianVectorCodebook(c.dim, c.bits, options);
    const double held_out = VectorCodebookMse(cb, 200000, 99);
    const double scalar = GaussianCodebook(c.bits).mse;
    std::printf("%d-D, %d bits/coord (%d points): train %.5f held-out %.5f scalar %.5f (%+.1f%%)\n",
                c.dim, c.bits, cb.size(), cb.mse, held_out, scalar, 100 * (held_out / scalar - 1));
  }
}

}  // namespace
}  // namespace tq::quant
