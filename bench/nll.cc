// NegLogLikelihood (perplexity's per-row log-softmax) at 32k and 128k vocabularies, against the
// former all-double formula (one double exp per entry) for comparison.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/perplexity.h"

namespace tq {
namespace {

std::vector<float> Logits(int64_t vocab) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(vocab));
  for (auto& x : v) x = d(rng);
  return v;
}

double NllAllDouble(const float* logits, int64_t vocab, int32_t target) {
  double max_l = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) max_l = std::max(max_l, double(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - max_l);
  return std::log(sum) + max_l - double(logits[target]);
}

void BM_Nll(benchmark::State& state) {
  const auto v = Logits(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(NegLogLikelihood(v.data(), int64_t(v.size()), 3));
  state.counters["diff"] = NegLogLikelihood(v.data(), int64_t(v.size()), 3) -
                           NllAllDouble(v.data(), int64_t(v.size()), 3);
}

void BM_NllAllDouble(benchmark::State& state) {
  const auto v = Logits(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(NllAllDouble(v.data(), int64_t(v.size()), 3));
}

BENCHMARK(BM_Nll)->Arg(32000)->Arg(128256);
BENCHMARK(BM_NllAllDouble)->Arg(32000)->Arg(128256);

}  // namespace
}  // namespace tq

BENCHMARK_MAIN();
