#include "quant/vector_codebook.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "gaussian.h"
#include "quant/codebook.h"
#include "quant/group_quantizer.h"

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

namespace tq::quant {
namespace {

// With the untrained product codebook, the vector method must reproduce the scalar method
// exactly: same codes (so the field order is right), same scales, same dequantized values.
TEST(VectorQuantizerTest, ProductBookEqualsScalarMethod) {
  const int64_t rows = 5, cols = 256;
  const std::vector<float> w = Gaussian(rows * cols, 3, 0.05);
  for (int dim : {2, 4}) {
    for (int bits : {1, 2, 3}) {
      if (dim * bits > 12) continue;
      VectorCodebookOptions options;
      options.iterations = 0;
      options.num_samples = 1000;
      const VectorCodebook vcb = TrainGaussianVectorCodebook(dim, bits, options);
      QuantSpec scalar;
      scalar.format = *FormatForBits(bits);
      scalar.group_size = 32;
      QuantSpec vec = scalar;
      vec.method = QuantMethod::kVector;
      vec.vector_codebook = &vcb;
      const QuantizedMatrix a = Quantize(w.data(), rows, cols, scalar);
      const QuantizedMatrix b = Quantize(w.data(), rows, cols, vec);
      b.Validate("b");
      EXPECT_EQ(a.codes, b.codes) << dim << " " << bits;
      EXPECT_EQ(a.scales, b.scales) << dim << " " << bits;
      std::vector<float> da(w.size()), db(w.size());
      Dequantize(a, da.data());
      Dequantize(b, db.data());
      EXPECT_EQ(da, db);
    }
  }
}

TEST(VectorQuantizerTest, TrainedBookLowersErrorAndRoundTrips) {
  const int64_t rows = 32, cols = 512;
  const std::vector<float> w = Gaussian(rows * cols, 4, 0.05);
  const VectorCodebook& vcb = GaussianVectorCodebook(2, 2);
  QuantSpec scalar;
  scalar.format = CodeFormat::kQ2;
  scalar.group_size = 64;
  QuantSpec vec = scalar;
  vec.method = QuantMethod::kVector;
  vec.vector_codebook = &vcb;
  const QuantizedMatrix q = Quantize(w.data(), rows, cols, vec);
  std::vector<float> d(w.size());
  Dequantize(q, d.data());
  double se = 0, norm = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    se += std::pow(double(w[i]) - d[i], 2);
    norm += double(w[i]) * w[i];
  }
  const QuantError e = QuantizationError(w.data(), rows, cols, vec);
  EXPECT_NEAR(se / norm, e.relative(), 1e-6 * e.relative());
  const double s = QuantizationError(w.data(), rows, cols, scalar).relative();
  std::printf("2-bit g64 on Gaussian: scalar %.5f, 2-D vector %.5f\n", s, e.relative());
  EXPECT_LT(e.relative(), 0.97 * s);
  EXPECT_NEAR(q.BitsPerWeight(), 2.25, 1e-12);
  // Validation of mismatched specs and matrices.
  QuantSpec bad = vec;
  bad.format = CodeFormat::kQ3;
  EXPECT_THROW(Quantize(w.data(), rows, cols, bad), Error);
  bad = vec;
  bad.vector_codebook = nullptr;
  EXPECT_THROW(Quantize(w.data(), rows, cols, bad), Error);
  QuantizedMatrix broken = q;
  broken.codebook.pop_back();
  EXPECT_THROW(broken.Validate("m"), Error);
  broken = q;
  broken.vector_dim = 3;
  EXPECT_THROW(broken.Validate("m"), Error);
}

}  // namespace
}  // namespace tq::quant
