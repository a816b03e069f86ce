// e8 group scales (quant/e8_scales.h): the per-tensor grid, the group quantizer's code choice,
// round trips, and that the error stays within ~1% of fp16 scales at the same group size.
#include "quant/e8_scales.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/group_quantizer.h"
#include "quant/rng.h"

namespace tq::quant {
namespace {

// W [rows, cols] Gaussian with a per-row standard deviation spread over `octaves` (trained
// matrices have rows of different norms; after rotation each row is close to Gaussian).
std::vector<float> Rows(int64_t rows, int64_t cols, double octaves, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> w(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double sigma = 0.02 * std::exp2(octaves * (double(r) / double(rows) - 0.5));
    for (int64_t c = 0; c < cols; ++c) w[size_t(r * cols + c)] = float(sigma * rng.Normal());
  }
  return w;
}

QuantSpec Spec(CodeFormat f, int g, ScaleFormat sf, ScaleMode mode = ScaleMode::kMseSearch) {
  QuantSpec s;
  s.format = f;
  s.group_size = g;
  s.scale.mode = mode;
  s.scale_format = sf;
  return s;
}

TEST(E8Table, GeometricGridCoveringTheGroupRange) {
  const E8ScaleTable t = MakeE8ScaleTable(0.01, 0.08);  // 3 octaves; with margins 4.58
  EXPECT_EQ(t.values[0], 0.0f);
  EXPECT_FLOAT_EQ(t.top, float(kE8TopMargin * 0.08));
  EXPECT_EQ(t.values[255], t.top);
  EXPECT_EQ(t.steps_per_octave, int(std::floor(254 / std::log2(1.5 * 0.08 / (0.5 * 0.01)))));
  for (int e = 2; e < 256; ++e) {
    ASSERT_GT(t.values[size_t(e)], t.values[size_t(e - 1)]);
    EXPECT_NEAR(t.values[size_t(e)] / t.values[size_t(e - 1)], std::exp2(1.0 / t.steps_per_octave),
                1e-5);
  }
  EXPECT_LE(t.values[1], 0.5 * 0.01);  // reaches below the smallest group
  // A narrow range gets the finest grid, a huge one the coarsest (and is then cut off below).
  EXPECT_EQ(MakeE8ScaleTable(0.05, 0.06).steps_per_octave, kE8MaxSteps);
  EXPECT_EQ(MakeE8ScaleTable(1e-20, 1.0).steps_per_octave, kE8MinSteps);
  const E8ScaleTable zero = MakeE8ScaleTable(0, 0);  // an all-zero tensor
  EXPECT_EQ(zero.top, 1.0f);
  EXPECT_NO_THROW(ValidateE8ScaleTable(zero.values.data(), kE8TableSize, "t"));
}

TEST(E8Table, NearestCodeRoundTripsAndClamps) {
  const E8ScaleTable t = MakeE8ScaleTable(0.003, 0.1);
  for (int e = 1; e < 256; ++e) EXPECT_EQ(NearestE8Code(t, t.values[size_t(e)]), e);
  // Half a step above value e rounds to e or e+1, never further.
  const double half = std::exp2(0.5 / t.steps_per_octave);
  for (int e = 1; e < 255; ++e) {
    const int c = NearestE8Code(t, t.values[size_t(e)] * half * 0.999);
    EXPECT_EQ(c, e);
  }
  EXPECT_EQ(NearestE8Code(t, 0.0), 0);
  EXPECT_EQ(NearestE8Code(t, -1.0), 0);
  EXPECT_EQ(NearestE8Code(t, 1e-30), 1);
  EXPECT_EQ(NearestE8Code(t, 1e30), 255);
}

TEST(E8Table, BadTablesAreRejected) {
  std::vector<float> t(256, 1.0f);
  EXPECT_NO_THROW(ValidateE8ScaleTable(t.data(), 256, "x"));
  EXPECT_THROW(ValidateE8ScaleTable(t.data(), 255, "x"), Error);
  t[7] = -0.5f;
  EXPECT_THROW(ValidateE8ScaleTable(t.data(), 256, "x"), Error);
  t[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(ValidateE8ScaleTable(t.data(), 256, "x"), Error);
  t[7] = std::numeric_limits<float>::infinity();
  try {
    ValidateE8ScaleTable(t.data(), 256, "tensor 'p.scale_table'");
    ADD_FAILURE() << "accepted an infinite entry";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.scale_table"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("entry 7"), std::string::npos) << e.what();
  }
}

// The quality claim: one byte per group costs about nothing against fp16 at the same group size.
TEST(E8Scales, ErrorWithinOnePercentOfFp16) {
  const int64_t rows = 96, cols = 512;
  const std::vector<float> w = Rows(rows, cols, 3.0, 11);
  for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4}) {
    for (int g : {16, 32, 64, 128}) {
      const double f16 =
          QuantizationError(w.data(), rows, cols, Spec(f, g, ScaleFormat::kF16)).relative();
      const double e8 =
          QuantizationError(w.data(), rows, cols, Spec(f, g, ScaleFormat::kE8)).relative();
      EXPECT_LT(e8, 1.01 * f16) << Traits(f).name << " g" << g;
      EXPECT_GT(e8, 0.98 * f16) << Traits(f).name << " g" << g;  // not a different quantizer
      const double f16_rms =
          QuantizationError(w.data(), rows, cols, Spec(f, g, ScaleFormat::kF16, ScaleMode::kRms))
              .relative();
      const double e8_rms =
          QuantizationError(w.data(), rows, cols, Spec(f, g, ScaleFormat::kE8, ScaleMode::kRms))
              .relative();
      EXPECT_LT(e8_rms, 1.02 * f16_rms) << Traits(f).name << " g" << g << " rms";
      std::printf("%s g%d: relative error f16 %.5f e8 %.5f (x%.4f); rms f16 %.5f e8 %.5f\n",
                  Traits(f).name.data(), g, f16, e8, e8 / f16, f16_rms, e8_rms);
    }
  }
  // The point of e8: q4 g32 at 4.25 bits beats q4 g64 with fp16 scales (4.25 bits) clearly.
  const double q4g32e8 =
      QuantizationError(w.data(), rows, cols, Spec(CodeFormat::kQ4, 32, ScaleFormat::kE8))
          .relative();
  const double q4g64f16 =
      QuantizationError(w.data(), rows, cols, Spec(CodeFormat::kQ4, 64, ScaleFormat::kF16))
          .relative();
  EXPECT_LT(q4g32e8, 0.93 * q4g64f16);
  EXPECT_DOUBLE_EQ(BitsPerWeight(Spec(CodeFormat::kQ4, 32, ScaleFormat::kE8), cols), 4.25);
  EXPECT_DOUBLE_EQ(BitsPerWeight(Spec(CodeFormat::kQ3, 16, ScaleFormat::kE8), cols), 3.5);
  EXPECT_DOUBLE_EQ(ScaleTableBitsPerWeight(ScaleFormat::kE8, rows, cols), 8192.0 / (rows * cols));
  EXPECT_EQ(ScaleTableBitsPerWeight(ScaleFormat::kF16, rows, cols), 0.0);
}

TEST(E8Scales, QuantizeDequantizeRoundTrip) {
  const int64_t rows = 37, cols = 256;
  std::vector<float> w = Rows(rows, cols, 6.0, 5);
  for (int64_t c = 0; c < cols; ++c) w[size_t(4 * cols + c)] = 0.0f;  // an all-zero row
  for (int64_t c = 32; c < 64; ++c) w[size_t(9 * cols + c)] = 0.0f;   // and group
  for (ScaleMode mode : {ScaleMode::kRms, ScaleMode::kMseSearch}) {
    const QuantSpec spec = Spec(CodeFormat::kQ3, 32, ScaleFormat::kE8, mode);
    const QuantizedMatrix q = Quantize(w.data(), rows, cols, spec, "t");
    ASSERT_NO_THROW(q.Validate("t"));
    EXPECT_TRUE(q.e8_scales());
    EXPECT_TRUE(q.scales.empty());
    ASSERT_EQ(q.scale_codes.size(), size_t(rows * cols / 32));
    const E8ScaleTable table = E8ScaleTableFor(w.data(), rows, cols, 32);
    ASSERT_EQ(q.scale_table.size(), 256u);
    for (int e = 0; e < 256; ++e) EXPECT_EQ(q.scale_table[size_t(e)], table.values[size_t(e)]);
    EXPECT_DOUBLE_EQ(q.BitsPerWeight(), 3.0 + 8.0 / 32);

    std::vector<float> d(w.size());
    Dequantize(q, d.data());
    double err = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(static_cast<size_t>(cols));
      DequantizeRow(q, r, row.data());
      for (int64_t c = 0; c < cols; ++c) {
        // ŵ = table[scale code] · level[code], and the matrix dequantizer agrees with the row one
        EXPECT_EQ(row[size_t(c)], d[size_t(r * cols + c)]);
        if (q.Scale(r, c / 32) == 0.0f) {
          EXPECT_EQ(d[size_t(r * cols + c)], 0.0f);
        }
        err += std::pow(double(w[size_t(r * cols + c)]) - d[size_t(r * cols + c)], 2);
      }
    }
    for (int64_t j = 0; j < cols / 32; ++j)
      EXPECT_EQ(q.scale_codes[size_t(4 * (cols / 32) + j)], 0);
    EXPECT_EQ(q.scale_codes[size_t(9 * (cols / 32) + 1)], 0);
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(d[size_t(4 * cols + c)], 0.0f);
    // The error the budget allocator measures is the error of what is stored.
    EXPECT_NEAR(QuantizationError(w.data(), rows, cols, spec).sq_error, err, 1e-6 * err);
    // Quantizing with the explicit table gives the same bytes.
    QuantSpec with_table = spec;
    with_table.e8_table = &table;
    const QuantizedMatrix q2 = Quantize(w.data(), rows, cols, with_table, "t");
    EXPECT_EQ(q2.codes, q.codes);
    EXPECT_EQ(q2.scale_codes, q.scale_codes);
  }
}

TEST(E8Scales, MseCodeIsNeverWorseThanTheNearestToTheFit) {
  const int64_t n = 32;
  const E8ScaleTable t = MakeE8ScaleTable(0.5, 2.0);
  const Codebook& cb = GaussianCodebook(CodeFormat::kQ4);
  ScaleOptions mse;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> w = Rows(1, n, 0, seed);
    for (float& v : w) v *= 50.0f;  // σ = 1
    std::vector<uint8_t> codes(static_cast<size_t>(n)), trial(static_cast<size_t>(n));
    double e8 = 0, f16 = 0;
    const uint8_t code = QuantizeGroupE8(w.data(), n, cb, mse, t, codes.data(), &e8);
    const float fit = F16ToF32(QuantizeGroup(w.data(), n, cb, mse, trial.data(), &f16));
    const int nearest = NearestE8Code(t, fit);
    double en = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float s = t.values[size_t(nearest)];
      en += std::pow(double(w[size_t(i)]) - s * cb.levels[cb.Encode(w[size_t(i)] / s)], 2);
    }
    EXPECT_LE(e8, en * (1 + 1e-6));
    // The reported error is the error of the returned codes at table[code].
    double check = 0;
    for (int64_t i = 0; i < n; ++i)
      check += std::pow(double(w[size_t(i)]) - t.values[code] * cb.levels[codes[size_t(i)]], 2);
    EXPECT_NEAR(e8, check, 1e-6 * check);
  }
}

TEST(E8Scales, OnlyTheCodebookMethod) {
  const std::vector<float> w = Rows(4, 64, 0, 1);
  QuantSpec s = Spec(CodeFormat::kQ4, 32, ScaleFormat::kE8);
  s.method = QuantMethod::kAffine;
  EXPECT_THROW(Quantize(w.data(), 4, 64, s, "t"), Error);
  // A matrix with inconsistent e8 fields fails Validate.
  QuantizedMatrix q = Quantize(w.data(), 4, 64, Spec(CodeFormat::kQ4, 32, ScaleFormat::kE8));
  q.scale_codes.pop_back();
  EXPECT_THROW(q.Validate("t"), Error);
  q = Quantize(w.data(), 4, 64, Spec(CodeFormat::kQ4, 32, ScaleFormat::kE8));
  q.scale_table[3] = -1.0f;
  EXPECT_THROW(q.Validate("t"), Error);
  q.scale_table.resize(16);
  EXPECT_THROW(q.Validate("t"), Error);
}

}  // namespace
}  // namespace tq::quant
