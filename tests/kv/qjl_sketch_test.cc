// The QJL residual sketch (kv/qjl_sketch.h): the estimator of q·k from MSE codes at b-1 bits plus
// sign(S r) and ‖r‖ is unbiased over the random matrix S (while the MSE codes alone shrink q·k),
// its variance is the paper's ((π/2)‖q‖²‖r‖² - (q·r)²) / m, and encoding is deterministic.
#include "kv/qjl_sketch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/kv_ops.h"
#include "kv/turboquant_codec.h"
#include "quant/hadamard.h"

namespace tq {
namespace {

constexpr int64_t kDim = 64;

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

struct Moments {
  double sum = 0, sum2 = 0;
  int64_t n = 0;
  void Add(double x) { sum += x, sum2 += x * x, ++n; }
  double mean() const { return sum / double(n); }
  double var() const { return (sum2 - sum * sum / double(n)) / double(n - 1); }
  double sem() const { return std::sqrt(var() / double(n)); }  // standard error of the mean
};

// Over `trials` draws of (key, query, rotation, S): the errors of q·k estimated by the MSE codes
// at `mse_bits` alone and by the codes plus the QJL sketch, relative to ‖q‖‖k‖.
void EstimatorErrors(double mse_bits, int trials, Moments* mse, Moments* qjl) {
  const KvVectorCodec codec(kDim, mse_bits, KvScale::kMse, KvCodebook::kSphere);
  std::mt19937_64 rng(17);
  std::normal_distribution<float> normal;
  std::vector<float> k(kDim), q(kDim), khat(kDim), r(kDim), sq(kDim);
  std::vector<uint8_t> codes(size_t(codec.code_bytes())), bits(kDim / 8);
  std::vector<uint16_t> scales(size_t(codec.groups()));
  for (int t = 0; t < trials; ++t) {
    // A query correlated with the key (attention's large scores): q = k + noise.
    for (int64_t i = 0; i < kDim; ++i) {
      k[size_t(i)] = normal(rng);
      q[size_t(i)] = k[size_t(i)] + normal(rng);
    }
    const auto rot = quant::HadamardRotation::Make(kDim, rng(), kDim);
    rot.Forward(k.data());
    rot.Forward(q.data());
    codec.Encode(k.data(), codes.data(), scales.data());
    codec.Decode(codes.data(), scales.data(), khat.data());
    for (int64_t i = 0; i < kDim; ++i) r[size_t(i)] = k[size_t(i)] - khat[size_t(i)];
    const KvQjlSketch sketch(kDim, rng());
    uint16_t norm = 0;
    sketch.Encode(r.data(), bits.data(), &norm);
    sketch.Project(q.data(), sq.data());
    const double exact = Dot(q, k), unit = std::sqrt(Dot(q, q) * Dot(k, k));
    const double est_mse = Dot(q, khat);
    const double est_qjl = est_mse + sketch.EstimateResidualDot(sq.data(), bits.data(), norm);
    mse->Add((est_mse - exact) / unit);
    qjl->Add((est_qjl - exact) / unit);
  }
}

TEST(QjlSketch, UnbiasedWhereTheMseCodesAreShrunk) {
  // b = 2, 2.5, 3, 3.5, 4 total bits: MSE codes at b - 1.
  for (double mse_bits : {1.0, 1.5, 2.0, 2.5, 3.0}) {
    Moments mse, qjl;
    EstimatorErrors(mse_bits, 4000, &mse, &qjl);
    // Unbiased: the mean error is within 4 standard errors of 0 (a false alarm has p < 1e-4).
    EXPECT_LT(std::fabs(qjl.mean()), 4 * qjl.sem()) << mse_bits << " bits: mean " << qjl.mean();
    // The MSE codes alone shrink q·k (x̂·x = ‖x̂‖² < ‖x‖² for the MSE-optimal scale): a bias of
    // many standard errors, below zero.
    EXPECT_LT(mse.mean(), -10 * mse.sem()) << mse_bits << " bits: mean " << mse.mean();
    // The sketch trades that bias for variance: its spread is larger than the codes' error.
    EXPECT_GT(qjl.var(), mse.var()) << mse_bits;
    std::printf(
        "MSE %.1f bits + QJL: mean error %+.5f (sem %.5f, sd %.4f); MSE only: %+.5f "
        "(sem %.5f, sd %.4f)\n",
        mse_bits, qjl.mean(), qjl.sem(), std::sqrt(qjl.var()), mse.mean(), mse.sem(),
        std::sqrt(mse.var()));
  }
}

TEST(QjlSketch, VarianceIsThePapersBound) {
  // Fixed q and r; over 4000 matrices S, Var[estimate of q·r] = ((π/2)‖q‖²‖r‖² - (q·r)²) / m
  // (each of the m terms is √(π/2)‖r‖ ⟨s_j, q⟩ sign⟨s_j, r⟩, E = q·r, E[x²] = (π/2)‖q‖²‖r‖²),
  // which is at most the paper's (π/2m)‖q‖²‖r‖².
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> q(kDim), r(kDim), sq(kDim);
  for (int64_t i = 0; i < kDim; ++i) {
    q[size_t(i)] = normal(rng);
    r[size_t(i)] = 0.1f * (normal(rng) + 0.8f * q[size_t(i)]);  // correlated: q·r is not ~0
  }
  const double qq = Dot(q, q), rr = Dot(r, r), qr = Dot(q, r);
  Moments est;
  std::vector<uint8_t> bits(kDim / 8);
  for (int t = 0; t < 4000; ++t) {
    const KvQjlSketch sketch(kDim, 1000 + uint64_t(t));
    uint16_t norm = 0;
    sketch.Encode(r.data(), bits.data(), &norm);
    sketch.Project(q.data(), sq.data());
    est.Add(sketch.EstimateResidualDot(sq.data(), bits.data(), norm));
  }
  const double want = (std::numbers::pi / 2 * qq * rr - qr * qr) / double(kDim);
  std::printf(
      "q.r %.5f: mean estimate %.5f (sem %.5f); variance %.6f, formula %.6f, paper's "
      "bound %.6f\n",
      qr, est.mean(), est.sem(), est.var(), want, std::numbers::pi / (2 * kDim) * qq * rr);
  EXPECT_LT(std::fabs(est.mean() - qr), 4 * est.sem()) << est.mean() << " vs " << qr;
  EXPECT_NEAR(est.var() / want, 1.0, 0.1) << est.var() << " vs " << want;
  EXPECT_LT(est.var(), std::numbers::pi / (2 * kDim) * qq * rr * 1.1);
}

TEST(QjlSketch, EncodeStoresSignsAndNorm) {
  const KvQjlSketch s(kDim, 9);
  ASSERT_EQ(s.m(), kDim);
  ASSERT_EQ(s.sign_bytes(), 8);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> r(kDim), sr(kDim);
  for (auto& x : r) x = normal(rng);
  std::vector<uint8_t> bits(8);
  uint16_t norm = 0;
  s.Encode(r.data(), bits.data(), &norm);
  s.Project(r.data(), sr.data());
  for (int64_t j = 0; j < kDim; ++j)
    EXPECT_EQ(bool(bits[size_t(j / 8)] >> (j % 8) & 1), sr[size_t(j)] >= 0) << j;
  EXPECT_NEAR(F16ToF32(norm), std::sqrt(Dot(r, r)), 1e-3 * std::sqrt(Dot(r, r)));
  // The entries are N(0, 1): mean ~0, variance ~1 over 4096 draws.
  double sum = 0, sum2 = 0;
  for (int64_t i = 0; i < kDim * kDim; ++i)
    sum += s.matrix()[i], sum2 += double(s.matrix()[i]) * s.matrix()[i];
  EXPECT_NEAR(sum / 4096, 0.0, 0.07);
  EXPECT_NEAR(sum2 / 4096, 1.0, 0.08);
  // A zero residual: norm 0, so the term vanishes whatever the bits.
  std::vector<float> zero(kDim, 0.0f);
  s.Encode(zero.data(), bits.data(), &norm);
  EXPECT_EQ(F16ToF32(norm), 0.0f);
  EXPECT_EQ(s.EstimateResidualDot(sr.data(), bits.data(), norm), 0.0);
}

TEST(QjlSketch, DeterministicPerSeed) {
  const KvQjlSketch a(kDim, 5), b(kDim, 5), c(kDim, 6);
  EXPECT_EQ(std::vector<float>(a.matrix(), a.matrix() + kDim * kDim),
            std::vector<float>(b.matrix(), b.matrix() + kDim * kDim));
  EXPECT_NE(std::vector<float>(a.matrix(), a.matrix() + kDim * kDim),
            std::vector<float>(c.matrix(), c.matrix() + kDim * kDim));
  // Pinned first entries: the matrix is a function of the seed alone (SplitMix64 + Box-Muller),
  // not of the standard library: a change here changes every stored sketch.
  // (Values from an independent Python SplitMix64 + Box-Muller for seed 5.)
  EXPECT_FLOAT_EQ(a.matrix()[0], 0.019979106634037066f);
  EXPECT_FLOAT_EQ(a.matrix()[1], -1.3782093800831878f);
  EXPECT_THROW(KvQjlSketch(1, 0), Error);
  EXPECT_THROW(KvQjlSketch(2048, 0), Error);
}

TEST(QjlSketch, KeyBitsAndSignDot) {
  for (double b : {2.0, 2.5, 3.0, 3.5, 4.0}) EXPECT_TRUE(IsValidQjlKeyBits(b)) << b;
  for (double b : {1.0, 1.5, 4.5, 8.0, 0.0}) EXPECT_FALSE(IsValidQjlKeyBits(b)) << b;
  // The codec codes the b-1 widths the sketch needs.
  for (double b : {1.0, 1.5}) {
    const KvVectorCodec c(kDim, b, KvScale::kMse, KvCodebook::kSphere);
    EXPECT_EQ(c.code_bytes(), b == 1.0 ? 8 : 12);
  }
  const float sq[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const uint8_t bits[2] = {0b10100101, 0b1};  // channels 0, 2, 5, 7, 8 set
  EXPECT_DOUBLE_EQ(kernels::QjlSignDot(sq, bits, 9), 1 - 2 + 3 - 4 - 5 + 6 - 7 + 8 + 9);
  EXPECT_DOUBLE_EQ(kernels::QjlFactor(64), std::sqrt(std::numbers::pi / 2) / 64);
}

}  // namespace
}  // namespace tq
