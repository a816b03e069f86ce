#include "quant/error_feedback.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "gaussian.h"
#include "quant/group_quantizer.h"

namespace tq::quant {
namespace {

// The sample second moment [dim, dim] of `samples` inputs x = A z (z ~ N(0, I)) with a mixing
// A [dim, dim] whose columns decay (x strongly correlated: a few directions carry most energy),
// as the activations of a real linear are.
std::vector<double> CorrelatedMoment(int64_t dim, int64_t samples, uint64_t seed) {
  std::vector<float> a = Gaussian(dim * dim, seed);
  for (int64_t i = 0; i < dim; ++i)
    for (int64_t j = 0; j < dim; ++j) a[size_t(i * dim + j)] *= float(1.0 / (1.0 + 0.25 * j));
  std::vector<double> h(size_t(dim * dim), 0.0), x(static_cast<size_t>(dim));
  SplitMix64 rng(seed + 1);
  std::vector<double> z(static_cast<size_t>(dim));
  for (int64_t s = 0; s < samples; ++s) {
    for (auto& v : z) v = rng.Normal();
    for (int64_t i = 0; i < dim; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < dim; ++j) acc += a[size_t(i * dim + j)] * z[size_t(j)];
      x[size_t(i)] = acc;
    }
    for (int64_t i = 0; i < dim; ++i)
      for (int64_t j = 0; j < dim; ++j) h[size_t(i * dim + j)] += x[size_t(i)] * x[size_t(j)];
  }
  for (double& v : h) v /= double(samples);
  return h;
}

QuantSpec Spec(CodeFormat f, int g, ScaleFormat sf = ScaleFormat::kF16) {
  QuantSpec s;
  s.format = f;
  s.group_size = g;
  s.scale_format = sf;
  return s;
}

std::vector<float> Dequantized(const QuantizedMatrix& q) {
  std::vector<float> out(size_t(q.rows * q.cols));
  Dequantize(q, out.data());
  return out;
}

// On inputs with a known correlated distribution, error feedback lowers the output error
// E‖(W − Ŵ)x‖² well below nearest rounding's, at every bit width and both scale formats (the
// weight's own error grows a little: it is traded for output error).
TEST(ErrorFeedback, LowersTheOutputErrorOnCorrelatedInputs) {
  const int64_t rows = 32, cols = 128;
  const std::vector<float> w = Gaussian(rows * cols, 7);
  const std::vector<double> h = CorrelatedMoment(cols, 4096, 11);
  const ErrorFeedback fb(h.data(), cols, {0.01});
  for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4}) {
    for (ScaleFormat sf : {ScaleFormat::kF16, ScaleFormat::kE8}) {
      const QuantSpec spec = Spec(f, 32, sf);
      const std::vector<float> plain = Dequantized(Quantize(w.data(), rows, cols, spec));
      const QuantizedMatrix qf = fb.Quantize(w.data(), rows, cols, spec);
      qf.Validate("w");
      const std::vector<float> fed = Dequantized(qf);
      const double e_plain = OutputError(w.data(), plain.data(), rows, cols, h.data());
      const double e_fed = OutputError(w.data(), fed.data(), rows, cols, h.data());
      EXPECT_LT(e_fed, 0.7 * e_plain) << Traits(f).name << " " << ScaleFormatName(sf);
    }
  }
}

// With H = I nothing is pushed: codes, scales and table equal plain rounding's exactly (any λ,
// any format and scale mode, scales fitted before or during the feedback).
TEST(ErrorFeedback, IdentityMomentGivesNearestRoundingExactly) {
  const int64_t rows = 9, cols = 256;
  std::vector<float> w = Gaussian(rows * cols, 3);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) w[size_t(r * cols + c)] *= float(0.02 * (r + 1));
  std::vector<double> eye(size_t(cols * cols), 0.0);
  for (int64_t i = 0; i < cols; ++i) eye[size_t(i * cols + i)] = 3.5;
  for (double damp : {0.0, 0.05}) {
    const bool lazy = damp > 0;  // scales fitted after feedback: with none, the same scales
    const ErrorFeedback fb(eye.data(), cols, {damp, lazy});
    for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8,
                         CodeFormat::kTernary}) {
      for (ScaleFormat sf : {ScaleFormat::kF16, ScaleFormat::kE8}) {
        for (ScaleMode mode : {ScaleMode::kRms, ScaleMode::kMseSearch}) {
          QuantSpec spec = Spec(f, 64, sf);
          spec.scale.mode = mode;
          const QuantizedMatrix a = Quantize(w.data(), rows, cols, spec);
          const QuantizedMatrix b = fb.Quantize(w.data(), rows, cols, spec);
          EXPECT_EQ(a.codes, b.codes) << Traits(f).name;
          EXPECT_EQ(a.scales, b.scales);
          EXPECT_EQ(a.scale_codes, b.scale_codes);
          EXPECT_EQ(a.scale_table, b.scale_table);
          EXPECT_EQ(a.codebook, b.codebook);
        }
      }
    }
  }
}

// The factor satisfies Uᵀ U = (H + λ mean(diag H) I)⁻¹, and the result is deterministic.
TEST(ErrorFeedback, FactorIsTheDampedInverseAndDeterministic) {
  const int64_t n = 48;
  const std::vector<double> h = CorrelatedMoment(n, 512, 5);
  const double damp = 0.02;
  const ErrorFeedback fb(h.data(), n, {damp});
  const std::vector<double> u = fb.DenseFactor();
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += h[size_t(i * n + i)] / double(n);
  // (Uᵀ U) · Hd = I
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) {
        double utu = 0;
        for (int64_t m = 0; m < n; ++m) utu += u[size_t(m * n + i)] * u[size_t(m * n + k)];
        s += utu * (h[size_t(k * n + j)] + (k == j ? damp * mean : 0.0));
      }
      worst = std::max(worst, std::abs(s - (i == j ? 1.0 : 0.0)));
      if (j < i) {
        EXPECT_EQ(u[size_t(i * n + j)], 0.0);
      }
    }
  }
  EXPECT_LT(worst, 1e-8);
  const std::vector<float> w = Gaussian(5 * n, 2);
  const QuantSpec spec = Spec(CodeFormat::kQ3, 16, ScaleFormat::kE8);
  const QuantizedMatrix a = fb.Quantize(w.data(), 5, n, spec);
  const QuantizedMatrix b = ErrorFeedback(h.data(), n, {damp}).Quantize(w.data(), 5, n, spec);
  EXPECT_EQ(a.codes, b.codes);
  EXPECT_EQ(a.scale_codes, b.scale_codes);
}

// A block-diagonal H (per-block moments) is factored per block: the blocks are found, the factor
// is the damped inverse's, and each block's codes are those of its columns quantized alone
// against its own block (with the whole H's mean diagonal for the ridge: one λ for all).
TEST(ErrorFeedback, BlockDiagonalMomentIsFactoredPerBlock) {
  const int64_t n = 128, rows = 6;
  const int64_t starts[] = {0, 32, 64, 128};
  std::vector<double> h(size_t(n * n), 0.0);
  for (int k = 0; k < 3; ++k) {
    const int64_t s = starts[k], b = starts[k + 1] - s;
    const std::vector<double> hb = CorrelatedMoment(b, 256, 20 + k);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j)
        h[size_t((s + i) * n + s + j)] = hb[size_t(i * b + j)] * (k + 1);
  }
  const double damp = 0.05;
  const ErrorFeedback fb(h.data(), n, {damp});
  EXPECT_EQ(fb.block_starts(), (std::vector<int64_t>{0, 32, 64, 128}));
  const std::vector<double> u = fb.DenseFactor();
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += h[size_t(i * n + i)] / double(n);
  double worst = 0;  // (Uᵀ U) · Hd = I
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) {
        double utu = 0;
        for (int64_t m = 0; m < n; ++m) utu += u[size_t(m * n + i)] * u[size_t(m * n + k)];
        s += utu * (h[size_t(k * n + j)] + (k == j ? damp * mean : 0.0));
      }
      worst = std::max(worst, std::abs(s - (i == j ? 1.0 : 0.0)));
    }
  }
  EXPECT_LT(worst, 1e-8);
  // Exact per block with no ridge (with one, the block's own λ would round differently).
  const std::vector<float> w = Gaussian(rows * n, 8);
  const QuantSpec spec = Spec(CodeFormat::kQ3, 32);
  const QuantizedMatrix all = ErrorFeedback(h.data(), n, {0.0}).Quantize(w.data(), rows, n, spec);
  const std::vector<float> whole = Dequantized(all);
  EXPECT_NE(whole, Dequantized(Quantize(w.data(), rows, n, spec)));  // feedback did act
  for (int k = 0; k < 3; ++k) {
    const int64_t s = starts[k], b = starts[k + 1] - s;
    std::vector<double> hb(size_t(b * b));
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j) hb[size_t(i * b + j)] = h[size_t((s + i) * n + s + j)];
    std::vector<float> wb(size_t(rows * b));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < b; ++c) wb[size_t(r * b + c)] = w[size_t(r * n + s + c)];
    const std::vector<float> part =
        Dequantized(ErrorFeedback(hb.data(), b, {0.0}).Quantize(wb.data(), rows, b, spec));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < b; ++c)
        ASSERT_EQ(part[size_t(r * b + c)], whole[size_t(r * n + s + c)])
            << k << " " << r << " " << c;
  }
  // A dense H is one block.
  EXPECT_EQ(ErrorFeedback(CorrelatedMoment(n, 512, 3).data(), n, {damp}).block_starts(),
            (std::vector<int64_t>{0, n}));
}

// A rank-deficient H (fewer samples than dimensions) works with dampening; bad input is refused.
TEST(ErrorFeedback, SingularMomentsAndBadInput) {
  const int64_t n = 64;
  const std::vector<double> h = CorrelatedMoment(n, 8, 9);  // rank 8
  const std::vector<float> w = Gaussian(4 * n, 4);
  const ErrorFeedback fb(h.data(), n, {0.01});
  fb.Quantize(w.data(), 4, n, Spec(CodeFormat::kQ4, 32)).Validate("w");
  std::vector<double> zero(size_t(n * n), 0.0);  // no input seen: plain rounding
  const ErrorFeedback z(zero.data(), n, {0.01});
  EXPECT_EQ(z.Quantize(w.data(), 4, n, Spec(CodeFormat::kQ4, 32)).codes,
            Quantize(w.data(), 4, n, Spec(CodeFormat::kQ4, 32)).codes);
  std::vector<double> bad = h;
  bad[5] = std::nan("");
  EXPECT_THROW(ErrorFeedback(bad.data(), n, {0.01}), Error);
  EXPECT_THROW(ErrorFeedback(h.data(), n, {-1.0}), Error);
  EXPECT_THROW(fb.Quantize(w.data(), 2, 2 * n, Spec(CodeFormat::kQ4, 32)), Error);  // 128 != 64
  QuantSpec affine = Spec(CodeFormat::kQ4, 32);
  affine.method = QuantMethod::kAffine;
  EXPECT_THROW(fb.Quantize(w.data(), 4, n, affine), Error);
}

}  // namespace
}  // namespace tq::quant
