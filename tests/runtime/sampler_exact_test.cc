// The bucketed selection of Sampler::Filter against a plain reference (the whole vocabulary
// sorted, HF's order of processors): the same surviving tokens, in the same order, with the same
// probabilities, hence the same seeded draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/sampler.h"

namespace tq {
namespace {

// Distinct logits on a grid 1e-3 apart (no ties in probability), shuffled, with a peak of
// `peak` tokens well above the rest.
std::vector<float> GridLogits(int64_t vocab, int peak, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) v[size_t(i)] = -20.0f + 1e-3f * float(i % 40000);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  for (int i = 0; i < peak; ++i) v[size_t(i * 7919 % vocab)] = 30.0f + 0.37f * float(i);
  return v;
}

// The unoptimized filter: every token's probability, a full sort, then top-k, top-p, min-p.
std::vector<std::pair<float, int32_t>> Reference(const SamplingParams& p,
                                                 const std::vector<float>& logits) {
  const int64_t vocab = int64_t(logits.size());
  const float inv_t = 1.0f / p.temperature;
  const float max_s = *std::max_element(logits.begin(), logits.end()) * inv_t;
  std::vector<std::pair<float, int32_t>> c;
  for (int64_t i = 0; i < vocab; ++i) c.push_back({logits[size_t(i)], int32_t(i)});
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.first > b.first; });
  if (p.top_k > 0 && p.top_k < vocab) c.resize(size_t(p.top_k));
  double z = 0;
  for (auto& [v, t] : c) {
    v = std::exp(v * inv_t - max_s);
    z += v;
  }
  std::vector<std::pair<float, int32_t>> kept;
  double before = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (p.top_p < 1.0f && before >= double(p.top_p) * z && i > 0) break;
    if (c[i].first < p.min_p && i > 0) break;
    before += c[i].first;
    kept.push_back(c[i]);
  }
  const bool sorted = p.top_p < 1.0f || (p.top_k > 0 && p.top_k < vocab);
  if (!sorted) {  // no top-k/top-p: the draw walks vocabulary order
    std::sort(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.second < b.second; });
  }
  return kept;
}

// Seeded draws the way Sampler::Sample makes them from a candidate list.
std::vector<int32_t> ReferenceDraws(const SamplingParams& p, const std::vector<float>& logits,
                                    int n) {
  const auto kept = Reference(p, logits);
  double total = 0;
  for (auto& [v, t] : kept) total += v;
  std::mt19937_64 rng(p.seed);
  std::vector<int32_t> out;
  for (int d = 0; d < n; ++d) {
    const double u = double(rng() >> 11) * 0x1.0p-53 * total;
    double acc = 0;
    int32_t pick = kept.back().second;
    for (auto& [v, t] : kept) {
      acc += v;
      if (u < acc) {
        pick = t;
        break;
      }
    }
    out.push_back(pick);
  }
  return out;
}

SamplingParams Params(float temp, int32_t top_k, float top_p, float min_p) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = 11;
  return p;
}

TEST(SamplerExact, SameCandidatesAndDrawsAsFullSort) {
  const std::vector<SamplingParams> cases = {
      Params(0.8f, 0, 1.0f, 0.0f),   Params(0.8f, 0, 0.95f, 0.0f),  Params(1.0f, 0, 0.5f, 0.0f),
      Params(3.0f, 0, 0.9f, 0.0f),   Params(40.0f, 0, 0.9f, 0.0f),  Params(0.7f, 40, 1.0f, 0.0f),
      Params(0.7f, 40, 0.9f, 0.0f),  Params(1.0f, 5000, 0.99f, 0),  Params(1.0f, 0, 1.0f, 0.05f),
      Params(10.0f, 0, 0.8f, 1e-3f), Params(2.0f, 100, 1.0f, 0.2f), Params(100.0f, 0, 1.0f, 0.9f),
      Params(1.0f, 0, 0.999999f, 0)};
  for (int peak : {0, 3, 60}) {
    const std::vector<float> logits = GridLogits(30000, peak, uint32_t(peak + 1));
    for (const SamplingParams& p : cases) {
      SCOPED_TRACE(testing::Message() << "peak " << peak << " temp " << p.temperature << " top_k "
                                      << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p);
      const auto want = Reference(p, logits);
      std::vector<bool> keep;
      Sampler s(p, int64_t(logits.size()));
      s.FilterMask(logits.data(), &keep);
      EXPECT_EQ(std::count(keep.begin(), keep.end(), true), int64_t(want.size()));
      for (auto& [v, t] : want) EXPECT_TRUE(keep[size_t(t)]) << t;
      // The draws see the candidates' order and probabilities: equal draws need both equal.
      const std::vector<int32_t> ref = ReferenceDraws(p, logits, 40);
      std::vector<float> row;
      for (int d = 0; d < 40; ++d) {
        row = logits;
        ASSERT_EQ(s.Sample(row.data()), ref[size_t(d)]) << "draw " << d;
      }
    }
  }
}

TEST(SamplerExact, NonFiniteLogits) {
  std::vector<float> logits(1000, -std::numeric_limits<float>::infinity());
  logits[17] = 2.0f;
  logits[400] = 1.0f;
  for (const SamplingParams& p :
       {Params(1, 0, 0.9f, 0), Params(1, 10, 1, 0), Params(1, 0, 1, 0.1f)}) {
    Sampler s(p, 1000);
    std::vector<float> row = logits;
    const int32_t t = s.Sample(row.data());
    EXPECT_TRUE(t == 17 || t == 400) << t;
  }
  std::vector<float> all_inf(1000, -std::numeric_limits<float>::infinity());
  Sampler s(Params(1, 0, 0.9f, 0), 1000);
  EXPECT_EQ(s.Sample(all_inf.data()), 0);  // nothing to draw from: argmax (the first)
}

}  // namespace
}  // namespace tq
