#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/error.h"
#include "io/model_config.h"

namespace tq {
namespace {

std::vector<bool> Mask(SamplingParams p, std::vector<float> logits) {
  Sampler s(p, int64_t(logits.size()));
  std::vector<bool> keep;
  s.FilterMask(logits.data(), &keep);
  return keep;
}

TEST(Sampler, GreedyIsArgMax) {
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<float> logits = {0.1f, 2.5f, -1.0f, 2.4f, 0.0f};
  Sampler s(p, 5);
  for (int i = 0; i < 5; ++i) {
    auto l = logits;
    EXPECT_EQ(s.Sample(l.data()), 1);
  }
  // First index wins ties; NaN never wins.
  std::vector<float> tie = {1.0f, 3.0f, 3.0f, NAN};
  EXPECT_EQ(ArgMax(tie.data(), 4), 1);
}

TEST(Sampler, TopKMask) {
  SamplingParams p;
  p.top_k = 2;
  auto keep = Mask(p, {0.0f, 3.0f, 1.0f, 2.0f, -5.0f});
  EXPECT_EQ(keep, (std::vector<bool>{false, true, false, true, false}));
}

TEST(Sampler, TopPMask) {
  // probs proportional to exp(logit): choose logits with exact probabilities 0.5, 0.3, 0.15, 0.05.
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingParams p;
  p.top_p = 0.7f;  // 0.5 < 0.7 -> keep the 0.3 token too; 0.8 >= 0.7 -> stop
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{false, true, false, true}));
  p.top_p = 0.5f;  // mass before the second token is 0.5 >= 0.5 -> only the first
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{false, true, false, false}));
  p.top_p = 0.96f;
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{true, true, true, true}));
  // Temperature 0.5 squares the probabilities: 0.25 : 0.09 : ... -> the first has 0.685.
  p.top_p = 0.68f;
  p.temperature = 0.5f;
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{false, true, false, false}));
}

TEST(Sampler, TopPOverLargeVocabSortsLazily) {
  // 1000 tokens, probabilities decreasing: top-p must find the same set as a full sort.
  std::vector<float> logits(1000);
  for (int i = 0; i < 1000; ++i) logits[size_t(i)] = -0.01f * float((i * 37) % 1000);
  SamplingParams p;
  p.top_p = 0.9f;
  auto keep = Mask(p, logits);
  // Reference: sort probabilities and walk.
  std::vector<std::pair<double, int>> pr;
  double z = 0;
  for (int i = 0; i < 1000; ++i) z += std::exp(double(logits[size_t(i)]));
  for (int i = 0; i < 1000; ++i) pr.push_back({std::exp(double(logits[size_t(i)])) / z, i});
  std::sort(pr.begin(), pr.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<bool> want(1000, false);
  double before = 0;
  for (auto& [q, i] : pr) {
    if (before >= 0.9) break;
    want[size_t(i)] = true;
    before += q;
  }
  EXPECT_EQ(keep, want);
  EXPECT_GT(std::count(keep.begin(), keep.end(), true), 64);  // crossed a lazy-sort boundary
}

TEST(Sampler, MinPMask) {
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingParams p;
  p.min_p = 0.25f;  // keep p >= 0.125
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{true, true, false, true}));
  p.top_k = 2;  // top-k then min-p
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{false, true, false, true}));
  p.top_k = 0;
  p.min_p = 0.7f;  // keep p >= 0.35
  EXPECT_EQ(Mask(p, logits), (std::vector<bool>{false, true, false, false}));
}

TEST(Sampler, SeedReproducibleAndDistributionFollowsProbabilities) {
  std::vector<float> logits = {std::log(0.1f), std::log(0.6f), std::log(0.3f)};
  SamplingParams p;
  p.seed = 1234;
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p, 3);
    std::vector<int32_t> out;
    for (int i = 0; i < 3000; ++i) {
      auto l = logits;
      out.push_back(s.Sample(l.data()));
    }
    return out;
  };
  auto a = run(1234), b = run(1234), c = run(99);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::map<int32_t, int> counts;
  for (auto t : a) counts[t]++;
  EXPECT_NEAR(counts[0] / 3000.0, 0.1, 0.03);
  EXPECT_NEAR(counts[1] / 3000.0, 0.6, 0.03);
  EXPECT_NEAR(counts[2] / 3000.0, 0.3, 0.03);
  // Reset re-seeds: the same stream again.
  p.seed = 1234;
  Sampler s(p, 3);
  auto l = logits;
  int32_t first = s.Sample(l.data());
  s.Reset();
  l = logits;
  EXPECT_EQ(s.Sample(l.data()), first);
}

TEST(Sampler, RepetitionPenaltyMath) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  Sampler s(p, 4);
  const int32_t prompt[] = {0, 1};
  s.AddPrompt(prompt);
  std::vector<float> l = {4.0f, -1.0f, 3.0f, -3.0f};
  // token 0: 4 / 2 = 2 < 3 -> token 2 wins; token 1: -1 * 2 = -2.
  EXPECT_EQ(s.Sample(l.data()), 2);
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[1], -2.0f);
  EXPECT_FLOAT_EQ(l[2], 3.0f);
  EXPECT_FLOAT_EQ(l[3], -3.0f);
  // A repeated token is penalized once, not per occurrence.
  s.Accept(2);
  s.Accept(2);
  l = {4.0f, -1.0f, 3.0f, -3.0f};
  s.Sample(l.data());
  EXPECT_FLOAT_EQ(l[2], 1.5f);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOutputOnly) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p, 3);
  const int32_t prompt[] = {0};
  s.AddPrompt(prompt);
  s.Accept(1);
  s.Accept(1);
  s.Accept(2);
  std::vector<float> l = {1.0f, 1.0f, 1.0f};
  s.Sample(l.data());
  EXPECT_FLOAT_EQ(l[0], 1.0f);                // prompt only: untouched
  EXPECT_FLOAT_EQ(l[1], 1.0f - 0.5f - 0.5f);  // twice
  EXPECT_FLOAT_EQ(l[2], 1.0f - 0.5f - 0.25f);
}

TEST(Sampler, RejectsBadParams) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler(p, 10), Error);
  p = {};
  p.min_p = 1.5f;
  EXPECT_THROW(Sampler(p, 10), Error);
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THROW(Sampler(p, 10), Error);
  p = {};
  EXPECT_THROW(Sampler(p, 0), Error);
}

TEST(Sampler, DefaultsFromGenerationConfig) {
  GenerationConfig g;
  g.do_sample = true;
  g.temperature = 0.7;
  g.top_p = 0.8;
  g.top_k = 20;
  auto p = SamplingParamsFromConfig(g);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(p.top_p, 0.8f);
  EXPECT_EQ(p.top_k, 20);
  g.do_sample = false;
  EXPECT_EQ(SamplingParamsFromConfig(g).temperature, 0.0f);
  EXPECT_EQ(SamplingParamsFromConfig(GenerationConfig{}).temperature, 0.0f);
}

}  // namespace
}  // namespace tq
