// Micro-benchmarks of the quant layer (single thread): FWHT and blockwise rotation, group
// quantization (RMS / MSE-refined / affine), packing and dequantization.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/thread_pool.h"
#include "quant/group_quantizer.h"
#include "quant/hadamard.h"
#include "quant/packing.h"
#include "quant/rng.h"

namespace tq::quant {
namespace {

std::vector<float> Gaussian(int64_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = float(0.02 * rng.Normal());
  return x;
}

void SingleThread() {
  static const bool once = [] {
    ThreadPool::SetGlobalThreads(1);
    return true;
  }();
  (void)once;
}

void BM_Fwht(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> x = Gaussian(n, 1);
  for (auto _ : state) {
    Fwht(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Fwht)->Arg(128)->Arg(2048)->Arg(4096);

// Full rotation (signs + blockwise FWHT + scale) of one vector: 4096 = one block, 14336 = 7 x 2048.
void BM_RotateForward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const HadamardRotation rot = HadamardRotation::Make(n, 3);
  std::vector<float> x = Gaussian(n, 2);
  for (auto _ : state) {
    rot.Forward(x.data());
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_RotateForward)->Arg(4096)->Arg(14336);

// Quantize a [64, 4096] matrix. Args: bits (ternary = 0), group, method (0 rms, 1 mse-refined,
// 2 affine, 3 mse-search).
void BM_Quantize(benchmark::State& state) {
  SingleThread();
  const int64_t rows = 64, cols = 4096;
  const std::vector<float> w = Gaussian(rows * cols, 4);
  QuantSpec spec;
  spec.format = state.range(0) == 0 ? CodeFormat::kTernary : *FormatForBits(int(state.range(0)));
  spec.group_size = int(state.range(1));
  spec.method = state.range(2) == 2 ? QuantMethod::kAffine : QuantMethod::kCodebook;
  spec.scale.mode = state.range(2) == 3   ? ScaleMode::kMseSearch
                    : state.range(2) == 1 ? ScaleMode::kMseRefined
                                          : ScaleMode::kRms;
  for (auto _ : state) {
    QuantizedMatrix q = Quantize(w.data(), rows, cols, spec);
    benchmark::DoNotOptimize(q.codes.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}
BENCHMARK(BM_Quantize)
    ->ArgNames({"bits", "group", "method"})
    ->Args({4, 64, 0})
    ->Args({4, 64, 1})
    ->Args({4, 64, 2})
    ->Args({4, 64, 3})
    ->Args({3, 64, 3})
    ->Args({3, 64, 1})
    ->Args({2, 64, 1})
    ->Args({0, 64, 1})
    ->Args({8, 128, 0});

void BM_Dequantize(benchmark::State& state) {
  SingleThread();
  const int64_t rows = 64, cols = 4096;
  const std::vector<float> w = Gaussian(rows * cols, 5);
  QuantSpec spec;
  spec.format = *FormatForBits(int(state.range(0)));
  const QuantizedMatrix q = Quantize(w.data(), rows, cols, spec);
  std::vector<float> out(w.size());
  for (auto _ : state) {
    Dequantize(q, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}
BENCHMARK(BM_Dequantize)->Arg(2)->Arg(3)->Arg(4);

// Pack + unpack one 4096-code row. Arg: format index.
void BM_PackUnpack(benchmark::State& state) {
  const CodeFormat f = CodeFormat(state.range(0));
  const int64_t n = 4096;
  SplitMix64 rng(6);
  std::vector<uint8_t> codes(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  for (auto& c : codes) c = uint8_t(rng.Next() % uint64_t(Traits(f).levels));
  std::vector<uint8_t> packed(PackedBytes(f, n));
  for (auto _ : state) {
    PackCodes(f, codes.data(), n, packed.data());
    UnpackCodes(f, packed.data(), n, back.data());
    benchmark::DoNotOptimize(back.data());
  }
  state.SetLabel(std::string(Traits(f).name));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_PackUnpack)->DenseRange(0, kNumCodeFormats - 1);

}  // namespace
}  // namespace tq::quant

BENCHMARK_MAIN();
