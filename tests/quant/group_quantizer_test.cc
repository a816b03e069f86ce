#include "quant/group_quantizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "gaussian.h"
#include "quant/packing.h"

namespace tq::quant {
namespace {

double RelErr(const std::vector<float>& w, const std::vector<float>& d) {
  double e = 0, n = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    e += std::pow(double(w[i]) - d[i], 2);
    n += double(w[i]) * w[i];
  }
  return e / n;
}

QuantSpec Spec(QuantMethod m, CodeFormat f, int g, ScaleMode s = ScaleMode::kMseSearch) {
  QuantSpec spec;
  spec.method = m;
  spec.format = f;
  spec.group_size = g;
  spec.scale.mode = s;
  return spec;
}

// Quantize -> Dequantize reproduces exactly the error QuantizationError predicts, for every
// method, format and group size, on a matrix whose rows have different scales.
TEST(GroupQuantizerTest, DequantizeMatchesPredictedError) {
  const int64_t rows = 13, cols = 384;
  std::vector<float> w = Gaussian(rows * cols, 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) w[size_t(r * cols + c)] *= float(0.01 * (r + 1));
  for (QuantMethod m : {QuantMethod::kCodebook, QuantMethod::kAffine}) {
    for (CodeFormat f : {CodeFormat::kQ1, CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4,
                         CodeFormat::kQ8, CodeFormat::kTernary}) {
      if (m == QuantMethod::kAffine && f == CodeFormat::kTernary) continue;
      for (int g : {16, 32, 64, 128}) {
        const QuantSpec spec = Spec(m, f, g);
        const QuantizedMatrix q = Quantize(w.data(), rows, cols, spec, "w");
        q.Validate("w");
        EXPECT_EQ(q.codes.size(), size_t(rows) * PackedBytes(f, cols));
        EXPECT_EQ(q.scales.size(), size_t(rows * cols / g));
        std::vector<float> d(w.size());
        Dequantize(q, d.data());
        const QuantError e = QuantizationError(w.data(), rows, cols, spec);
        EXPECT_NEAR(RelErr(w, d), e.relative(), 1e-6 * e.relative() + 1e-12)
            << int(m) << " " << Traits(f).name << " g" << g;
        EXPECT_NEAR(q.BitsPerWeight(), BitsPerWeight(spec, cols), 1e-12);
      }
    }
  }
}

// On Gaussian data the codebook quantizer's relative error is close to the codebook's MSE (the
// per-group scale estimate costs a little at small groups), refinement never hurts, the scale
// search lowers the error further, and the TurboQuant codebook beats affine at 2 and 3 bits.
TEST(GroupQuantizerTest, GaussianErrorsAndRefinement) {
  const int64_t rows = 64, cols = 1024;
  const std::vector<float> w = Gaussian(rows * cols, 2, 0.02);
  for (int bits : {2, 3, 4}) {
    const CodeFormat f = *FormatForBits(bits);
    for (int g : {32, 64, 128}) {
      const double rms = QuantizationError(w.data(), rows, cols,
                                           Spec(QuantMethod::kCodebook, f, g, ScaleMode::kRms))
                             .relative();
      const double mse =
          QuantizationError(w.data(), rows, cols,
                            Spec(QuantMethod::kCodebook, f, g, ScaleMode::kMseRefined))
              .relative();
      const double search =
          QuantizationError(w.data(), rows, cols, Spec(QuantMethod::kCodebook, f, g)).relative();
      const double affine =
          QuantizationError(w.data(), rows, cols, Spec(QuantMethod::kAffine, f, g)).relative();
      const double cb = GaussianCodebook(bits).mse;
      std::printf(
          "gaussian %d-bit g%-3d  rms %.5f  mse-refined %.5f  mse-search %.5f  affine %.5f  "
          "(codebook %.5f)\n",
          bits, g, rms, mse, search, affine, cb);
      EXPECT_GT(rms, 0.9 * cb) << bits << " g" << g;
      EXPECT_LT(rms, 1.35 * cb) << bits << " g" << g;
      EXPECT_LE(mse, rms) << bits << " g" << g;
      EXPECT_LE(search, mse) << bits << " g" << g;
      if (bits >= 3) {
        EXPECT_LT(search, 0.97 * mse) << "the search pays at 3-4 bits";
      }
      if (bits == 2 || (bits == 3 && g >= 64)) {
        EXPECT_LT(mse, affine) << bits << " g" << g;
      }
      if (bits <= 3) {
        EXPECT_LT(search, affine) << bits << " g" << g;
      }
    }
  }
}

// Per group: refined <= RMS and search <= refined (same rounds), and the returned error is the
// true one for the returned scale and codes.
TEST(GroupQuantizerTest, QuantizeGroupRefinedNeverWorse) {
  SplitMix64 rng(5);
  const Codebook& cb = GaussianCodebook(3);
  ScaleOptions rms_opt, mse_opt, search_opt;
  rms_opt.mode = ScaleMode::kRms;
  mse_opt.mode = ScaleMode::kMseRefined;
  search_opt.mode = ScaleMode::kMseSearch;
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 8 + int(rng.Next() % 120);
    std::vector<float> w(static_cast<size_t>(n));
    const bool heavy = trial % 2;
    for (auto& v : w) v = float(heavy ? rng.Normal() * rng.Normal() * rng.Normal() : rng.Normal());
    std::vector<uint8_t> c_rms(static_cast<size_t>(n)), c_mse(static_cast<size_t>(n)),
        c_search(static_cast<size_t>(n));
    double e_rms, e_mse, e_search;
    const uint16_t s_rms = QuantizeGroup(w.data(), n, cb, rms_opt, c_rms.data(), &e_rms);
    const uint16_t s_mse = QuantizeGroup(w.data(), n, cb, mse_opt, c_mse.data(), &e_mse);
    const uint16_t s_search =
        QuantizeGroup(w.data(), n, cb, search_opt, c_search.data(), &e_search);
    ASSERT_LE(e_mse, e_rms);
    ASSERT_LE(e_search, e_mse);
    for (auto [s, c, e] :
         {std::tuple{s_mse, &c_mse, e_mse}, std::tuple{s_search, &c_search, e_search}}) {
      double check = 0;
      for (int i = 0; i < n; ++i)
        check +=
            std::pow(double(w[size_t(i)]) - double(F16ToF32(s)) * cb.levels[(*c)[size_t(i)]], 2);
      ASSERT_NEAR(check, e, 1e-9 * (1 + check));
    }
    // RMS scale is the fp16 RMS and codes are nearest levels.
    double ss = 0;
    for (float v : w) ss += double(v) * v;
    ASSERT_EQ(s_rms, F32ToF16(float(std::sqrt(ss / n))));
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(c_rms[size_t(i)], cb.Encode(w[size_t(i)] / F16ToF32(s_rms)));
  }
}

TEST(GroupQuantizerTest, RejectsBadScaleOptions) {
  const std::vector<float> w = Gaussian(64, 1);
  QuantSpec spec = Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32);
  spec.scale.search_steps = 0;
  EXPECT_THROW(Quantize(w.data(), 1, 64, spec), Error);
  spec = Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32);
  spec.scale.search_lo = 1.5f;
  EXPECT_THROW(Quantize(w.data(), 1, 64, spec), Error);
  spec = Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32);
  spec.scale.refine_rounds = -1;
  EXPECT_THROW(Quantize(w.data(), 1, 64, spec), Error);
}

TEST(GroupQuantizerTest, ZeroAndConstantGroups) {
  std::vector<float> w(128, 0.0f);
  for (int i = 64; i < 128; ++i) w[size_t(i)] = 0.25f;
  for (QuantMethod m : {QuantMethod::kCodebook, QuantMethod::kAffine}) {
    const QuantizedMatrix q = Quantize(w.data(), 1, 128, Spec(m, CodeFormat::kQ4, 64));
    std::vector<float> d(128);
    Dequantize(q, d.data());
    for (int i = 0; i < 64; ++i) EXPECT_EQ(d[size_t(i)], 0.0f);
    if (m == QuantMethod::kAffine) {
      for (int i = 64; i < 128; ++i) EXPECT_EQ(d[size_t(i)], 0.25f);
    } else {
      for (int i = 64; i < 128; ++i) EXPECT_NEAR(d[size_t(i)], 0.25f, 0.25f * 0.1f);
    }
  }
}

TEST(GroupQuantizerTest, AffineIsRoundToNearest) {
  const std::vector<float> w = Gaussian(64, 9);
  uint16_t s, mn;
  std::vector<uint8_t> codes(64);
  double err;
  QuantizeAffineGroup(w.data(), 64, 3, &s, &mn, codes.data(), &err);
  float lo = w[0], hi = w[0];
  for (float v : w) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(mn, F32ToF16(lo));
  EXPECT_EQ(s, F32ToF16((hi - lo) / 7));
  for (int i = 0; i < 64; ++i) {
    const float rec = F16ToF32(mn) + F16ToF32(s) * codes[size_t(i)];
    for (int q = 0; q < 8; ++q)
      ASSERT_LE(std::abs(w[size_t(i)] - rec),
                std::abs(w[size_t(i)] - (F16ToF32(mn) + F16ToF32(s) * q)) + 1e-6f);
  }
  EXPECT_NEAR(BitsPerWeight(Spec(QuantMethod::kAffine, CodeFormat::kQ3, 64), 4096), 3.5, 1e-12);
  EXPECT_NEAR(BitsPerWeight(Spec(QuantMethod::kCodebook, CodeFormat::kQ3, 64), 4096), 3.25, 1e-12);
  EXPECT_NEAR(BitsPerWeight(Spec(QuantMethod::kCodebook, CodeFormat::kTernary, 64), 4000), 1.85,
              1e-12);
}

TEST(GroupQuantizerTest, RejectsBadInput) {
  std::vector<float> w = Gaussian(2 * 96, 4);
  EXPECT_THROW(Quantize(w.data(), 2, 96, Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 64)), Error);
  EXPECT_THROW(Quantize(w.data(), 2, 96, Spec(QuantMethod::kAffine, CodeFormat::kTernary, 32)),
               Error);
  EXPECT_THROW(Quantize(w.data(), 0, 96, Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32)), Error);
  QuantSpec wrong_book = Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32);
  wrong_book.codebook = &GaussianCodebook(3);
  EXPECT_THROW(Quantize(w.data(), 2, 96, wrong_book), Error);
  w[100] = NAN;
  try {
    Quantize(w.data(), 2, 96, Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32), "layers.0.q");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[quantize layers.0.q] non-finite weight nan at [1, 4]"),
              std::string::npos)
        << e.what();
  }
  w[100] = 1e6f;  // scale overflows fp16
  EXPECT_THROW(Quantize(w.data(), 2, 96, Spec(QuantMethod::kCodebook, CodeFormat::kQ4, 32)), Error);
  EXPECT_THROW(Quantize(w.data(), 2, 96, Spec(QuantMethod::kAffine, CodeFormat::kQ4, 32)), Error);
}

// The converter's output must not depend on the machine's thread count.
TEST(GroupQuantizerTest, ResultIndependentOfThreadCount) {
  const std::vector<float> w = Gaussian(37 * 256, 12, 0.03);
  const QuantSpec spec = Spec(QuantMethod::kCodebook, CodeFormat::kQ3, 64);
  ThreadPool::SetGlobalThreads(1);
  const QuantizedMatrix one = Quantize(w.data(), 37, 256, spec);
  const QuantError e1 = QuantizationError(w.data(), 37, 256, spec);
  ThreadPool::SetGlobalThreads(3);
  const QuantizedMatrix three = Quantize(w.data(), 37, 256, spec);
  const QuantError e3 = QuantizationError(w.data(), 37, 256, spec);
  ThreadPool::SetGlobalThreads(0);
  EXPECT_EQ(one.codes, three.codes);
  EXPECT_EQ(one.scales, three.scales);
  EXPECT_EQ(e1.sq_error, e3.sq_error);
}

TEST(GroupQuantizerTest, ValidateCatchesInconsistentMatrices) {
  const std::vector<float> w = Gaussian(4 * 64, 8);
  QuantizedMatrix q = Quantize(w.data(), 4, 64, Spec(QuantMethod::kCodebook, CodeFormat::kQ3, 32));
  EXPECT_NO_THROW(q.Validate("t"));
  QuantizedMatrix bad = q;
  bad.codes.pop_back();
  EXPECT_THROW(bad.Validate("t"), Error);
  bad = q;
  bad.scales.push_back(0);
  EXPECT_THROW(bad.Validate("t"), Error);
  bad = q;
  bad.codebook.pop_back();
  EXPECT_THROW(bad.Validate("t"), Error);
  bad = q;
  bad.group_size = 48;
  EXPECT_THROW(bad.Validate("t"), Error);
}

}  // namespace
}  // namespace tq::quant
