// Float kernels of the cpu backend (and the ref oracle for scale): matmul with bf16/f16/f32
// weights at decode (n = 1) and prefill (n = 512) shapes, attention over an fp16 cache.
// Counters: GFLOP/s (2 flops per multiply-add) and weight GB/s.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/backend.h"

namespace tq::kernels {
namespace {

std::vector<uint16_t> RandomBf16(int64_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = F32ToBf16(d(rng));
  return v;
}

void BM_MatMul(benchmark::State& state, Backend& table, DType dt) {
  const int64_t n = state.range(0), out = state.range(1), in = state.range(2);
  std::vector<uint16_t> w16 = RandomBf16(out * in);
  std::vector<float> w32(w16.size());
  for (size_t i = 0; i < w16.size(); ++i) w32[i] = Bf16ToF32(w16[i]);
  if (dt == DType::F16)
    for (size_t i = 0; i < w16.size(); ++i) w16[i] = F32ToF16(w32[i]);
  const TensorView w{
      dt == DType::F32 ? static_cast<const void*>(w32.data()) : w16.data(), dt, {out, in}};
  std::vector<float> x(static_cast<size_t>(n * in), 0.5f), y(static_cast<size_t>(n * out));
  for (auto _ : state) {
    table.MatMul(x.data(), n, w, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = double(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * out * in * iters * 1e-9, benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(double(w.nbytes()) * iters * 1e-9, benchmark::Counter::kIsRate);
}

void MatMulShapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 2048, 2048})->Args({1, 8192, 2048})->Args({4, 2048, 2048})->Args({16, 2048, 2048});
  b->Args({32, 2048, 2048});
  b->Args({64, 2048, 2048})->Args({512, 512, 512})->Args({512, 2048, 2048});
  b->Args({512, 8192, 512})->Args({64, 96, 256})->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatMul, cpu_bf16, CpuBackend(), DType::BF16)->Apply(MatMulShapes);
BENCHMARK_CAPTURE(BM_MatMul, cpu_f16, CpuBackend(), DType::F16)->Apply(MatMulShapes);
BENCHMARK_CAPTURE(BM_MatMul, cpu_f32, CpuBackend(), DType::F32)->Apply(MatMulShapes);
BENCHMARK_CAPTURE(BM_MatMul, ref_bf16, RefBackend(), DType::BF16)
    ->Args({1, 2048, 2048})
    ->UseRealTime();

// Decode (n = 1) and prefill (n = 512 after pos0 = 0) attention, 32 heads / 8 kv heads, d = 64.
void BM_Attention(benchmark::State& state) {
  const int64_t n = state.range(0), ctx = state.range(1);
  const int64_t heads = 32, kv_heads = 8, hd = 64, cap = ctx + n;
  std::vector<uint16_t> k(static_cast<size_t>(kv_heads * cap * hd), F32ToF16(0.1f));
  std::vector<uint16_t> v(k.size(), F32ToF16(0.2f));
  std::vector<float> q(static_cast<size_t>(n * heads * hd), 0.3f), out(q.size());
  const KvView kv{k.data(), v.data(), DType::F16, cap * hd};
  const AttentionParams p{heads, kv_heads, hd, 0.125f, 0};
  for (auto _ : state) {
    CpuBackend().Attention(q.data(), n, ctx, kv, p, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_GB/s"] = benchmark::Counter(
      double(2 * kv_heads * (ctx + n) * hd * 2) * double(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Attention)->Args({1, 4096})->Args({1, 32768})->Args({512, 0})->UseRealTime();

}  // namespace
}  // namespace tq::kernels

// $TQ_THREADS sets the thread count (1 measures one core's kernel efficiency on a busy machine).
int main(int argc, char** argv) {
  if (const char* t = std::getenv("TQ_THREADS")) tq::ThreadPool::SetGlobalThreads(std::atoi(t));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
