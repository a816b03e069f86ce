// Decode attention (n = 1) of one layer over a KV cache of C positions, fp16 vs TurboQuant codes
// (Llama-3.2-1B attention shape: 32 query heads, 8 kv heads, head_dim 64). Counter: KV bytes of
// the layer read per second.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kv/kv_cache.h"

namespace tq {
namespace {

void BM_KvDecodeAttention(benchmark::State& state, double k_bits, double v_bits) {
  const int64_t context = state.range(0);
  KvLayout layout;
  layout.num_layers = 1;
  layout.num_heads = 32;
  layout.num_kv_heads = 8;
  layout.head_dim = 64;
  layout.scale = 0.125f;
  KvCacheOptions o;
  o.max_tokens = context;
  o.k_bits = k_bits;
  o.v_bits = v_bits;
  auto cache = MakeKvCache(layout, o);
  cache->FillSynthetic(context - 1, 1);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  std::vector<float> k(8 * 64), v(8 * 64), q(32 * 64), out(32 * 64);
  for (auto* x : {&k, &v, &q})
    for (auto& e : *x) e = normal(rng);
  cache->Append(0, k.data(), v.data(), 1);
  for (auto _ : state) {
    cache->Attend(0, q.data(), 1, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_GB/s"] = benchmark::Counter(
      double(cache->BytesPerToken()) * double(context) * double(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

void Contexts(benchmark::internal::Benchmark* b) {
  b->Arg(512)->Arg(4096)->Arg(32768)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_KvDecodeAttention, f16, 0, 0)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k8v8, 8, 8)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k8v3, 8, 3)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k4v3, 4, 3)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k3v3, 3, 3)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k3_5v3_5, 3.5, 3.5)->Apply(Contexts);

}  // namespace
}  // namespace tq

BENCHMARK_MAIN();
