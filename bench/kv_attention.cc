// Decode attention (n = 1) of one layer over a KV cache of C positions, fp16 vs TurboQuant codes
// (Llama-3.2-1B attention shape: 32 query heads, 8 kv heads, head_dim 64). Counter: KV bytes of
// the layer read per second. Args: context, threads. $TQ_KV_INT8=0: fp32 key scores. `_qjl`:
// keys with the QJL residual sketch (k bits = MSE codes at k-1 + sign bits).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_cache.h"

namespace tq {
namespace {

void BM_KvDecodeAttention(benchmark::State& state, double k_bits, double v_bits, bool qjl = false) {
  const int64_t context = state.range(0);
  ThreadPool::SetGlobalThreads(int(state.range(1)));
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
  o.qjl = qjl;
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
  for (int64_t c : {512, 4096, 32768})
    for (int64_t t : {1, 2}) b->Args({c, t});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_KvDecodeAttention, f16, 0, 0)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k8v8, 8, 8)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k8v3, 8, 3)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k4v3, 4, 3)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k3v3, 3, 3)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k3_5v3_5, 3.5, 3.5)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k4v3_qjl, 4, 3, true)->Apply(Contexts);
BENCHMARK_CAPTURE(BM_KvDecodeAttention, k3v3_qjl, 3, 3, true)->Apply(Contexts);

}  // namespace
}  // namespace tq

BENCHMARK_MAIN();
