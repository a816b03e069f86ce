// Prefill GEMM micro-benchmarks (issue #7, the many-token side): 512 tokens through one
// [8192, 2048] matrix (an MLP up/gate projection of Llama-3.2-1B) as packed q2/q3/q4 g64 or as
// bf16, at a forced ISA level (1 = avx2 and 2 = avx512: the int8 GEMM on packed codes, bf16 the
// fp32 GEMM; 3 = amx: bf16 tiles),
// 1 or 2 threads. Counters: GFLOP/s (2 per multiply-add) and the effective tokens/s of the matrix.
//   BM_PrefillGemm/<format: 0 q2, 1 q3, 2 q4, 3 bf16>/<isa>/<threads>/512
//   BM_BatchGemm/<format>/<isa>/1/<tokens>: the server's 4-16-sequence decode steps
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "kernels/packed_ops.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace {

using tq::kernels::cpu::Isa;
using tq::quant::CodeFormat;

constexpr int64_t kRows = 8192, kCols = 2048, kGroup = 64;

struct Weights {
  tq::AlignedBuffer<uint8_t> codes;
  tq::AlignedBuffer<uint16_t> scales, bf16;
};

void BM_PrefillGemm(benchmark::State& state) {
  const int64_t kTokens = state.range(3);
  const int fi = int(state.range(0));
  const Isa want = Isa(state.range(1));
  tq::ThreadPool::SetGlobalThreads(int(state.range(2)));
  const Isa saved = tq::kernels::cpu::ActiveIsa();
  if (tq::kernels::cpu::SetActiveIsa(want) != want) {
    state.SkipWithError("ISA not available");
    tq::kernels::cpu::SetActiveIsa(saved);
    return;
  }
  std::mt19937_64 rng(1);
  Weights w;
  tq::kernels::PackedMatrix m;
  const CodeFormat formats[] = {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4};
  if (fi < 3) {
    m.format = formats[fi];
    m.rows = kRows;
    m.cols = kCols;
    m.group_size = kGroup;
    m.row_bytes = int64_t(tq::quant::PackedBytes(m.format, kCols));
    w.codes.resize(size_t(kRows * m.row_bytes));
    for (size_t i = 0; i < w.codes.size(); ++i) w.codes[i] = uint8_t(rng());
    w.scales.resize(size_t(kRows * kCols / kGroup));
    for (size_t i = 0; i < w.scales.size(); ++i)
      w.scales[i] = tq::F32ToF16(0.01f + (i % 7) * 1e-3f);
    m.codes = w.codes.data();
    m.scales = w.scales.data();
    m.codebook = tq::quant::GaussianCodebook(m.format).levels.data();
  } else {
    std::normal_distribution<float> nd(0.0f, 0.02f);
    w.bf16.resize(size_t(kRows * kCols));
    for (size_t i = 0; i < w.bf16.size(); ++i) w.bf16[i] = tq::F32ToBf16(nd(rng));
  }
  const tq::TensorView wv{w.bf16.data(), tq::DType::BF16, {kRows, kCols}};
  std::vector<float> x(size_t(kTokens * kCols)), y(size_t(kTokens * kRows));
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    if (fi < 3) {
      tq::kernels::PackedMatMul(x.data(), kTokens, m, nullptr, y.data());
    } else {
      tq::kernels::MatMul(x.data(), kTokens, wv, nullptr, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double it = double(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(it * 2.0 * kTokens * kRows * kCols * 1e-9, benchmark::Counter::kIsRate);
  state.counters["tok/s"] = benchmark::Counter(it * kTokens, benchmark::Counter::kIsRate);
  const char* names[] = {"q2", "q3", "q4", "bf16"};
  state.SetLabel(std::string(names[fi]) + " " + std::string(tq::kernels::cpu::IsaName(want)));
  tq::kernels::cpu::SetActiveIsa(saved);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int f = 0; f < 4; ++f)
      for (int isa : {3, 2, 1}) b->Args({f, isa, threads, 512});
}
// Server batch sizes (a decode step of 4-16 sequences), one thread.
void BatchArgs(benchmark::internal::Benchmark* b) {
  for (int tokens : {4, 8, 12, 16})
    for (int f : {2, 3})
      for (int isa : {3, 2, 1}) b->Args({f, isa, 1, tokens});
}
BENCHMARK(BM_PrefillGemm)->Apply(Args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrefillGemm)
    ->Name("BM_BatchGemm")
    ->Apply(BatchArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
