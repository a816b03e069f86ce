// Sampler::Sample on one row of logits: greedy, temperature alone, temperature + top-p,
// top-k + top-p and min-p, for a 32k and a 128k vocabulary. Logits look like a language
// model's: a few dozen plausible tokens over a long Gaussian tail.
#include "runtime/sampler.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace tq {
namespace {

std::vector<float> LmLogits(int64_t vocab) {
  std::mt19937 rng(7);
  std::normal_distribution<float> tail(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(vocab));
  for (auto& x : v) x = tail(rng);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int i = 0; i < 40; ++i) v[size_t(pick(rng))] = 8.0f + 0.25f * float(i % 16);
  return v;
}

void BM_Sample(benchmark::State& state, SamplingParams p) {
  const int64_t vocab = state.range(0);
  const std::vector<float> logits = LmLogits(vocab);
  std::vector<float> work(logits.size());
  p.seed = 3;
  Sampler s(p, vocab);
  for (auto _ : state) {
    work = logits;  // Sample() modifies the row (penalties)
    benchmark::DoNotOptimize(s.Sample(work.data()));
  }
  state.SetItemsProcessed(state.iterations());
}

SamplingParams Params(float temp, int32_t top_k, float top_p, float min_p) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

BENCHMARK_CAPTURE(BM_Sample, greedy, Params(0, 0, 1, 0))->Arg(32000)->Arg(128256);
BENCHMARK_CAPTURE(BM_Sample, temp, Params(0.8f, 0, 1, 0))->Arg(32000)->Arg(128256);
BENCHMARK_CAPTURE(BM_Sample, temp_top_p, Params(0.8f, 0, 0.95f, 0))->Arg(32000)->Arg(128256);
BENCHMARK_CAPTURE(BM_Sample, top_k_top_p, Params(0.8f, 40, 0.95f, 0))->Arg(32000)->Arg(128256);
BENCHMARK_CAPTURE(BM_Sample, min_p, Params(1.0f, 0, 1, 0.05f))->Arg(32000)->Arg(128256);
BENCHMARK_CAPTURE(BM_Sample, top_p_flat, Params(1.5f, 0, 0.9f, 0))->Arg(128256);

}  // namespace
}  // namespace tq

BENCHMARK_MAIN();
