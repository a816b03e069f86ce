// Packed-weight kernels on Llama-3.2-1B-like shapes ([8192, 2048] MLP matrices):
// - BM_Decode: one token through enough matrices to fill 1 GiB of codes (so weights stream from
//   memory as in decode), per format × ISA level (0 scalar/generic, 1 avx2, 2 avx512) × threads.
//   Bytes/s counts codes + scales read: compare with BM_Read over the same memory in the same run.
// - BM_Prefill: 128 tokens through one matrix (compute-bound): weights/s and GFLOP/s.
// - BM_DecodeHot: n tokens through one [1024, 2048] matrix that stays in L2: the kernel's compute
//   speed alone (Gweights/s counts weights × tokens), per format × threads × tokens. Up to
//   kFastDecodeMaxTokens the int8 decode path runs unless the AMX path takes n >= kAmxMinTokens;
//   n = 7 vs 8 shows the int8/AMX crossover, 16 vs 17 the int8/tiled one on CPUs without AMX.
// Set TQ_PK_MIB to change the 1 GiB, TQ_PK_GROUP the group size (64).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/packed_ops.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace {

using tq::kernels::PackedMatrix;
using tq::kernels::cpu::Isa;
using tq::quant::CodeFormat;

constexpr int64_t kRows = 8192, kCols = 2048;

// Group size of the matrices: 64, or TQ_PK_GROUP (convert's default is 128).
int64_t Group() {
  const char* env = std::getenv("TQ_PK_GROUP");
  const int64_t g = env ? std::atoll(env) : 64;
  return g >= 16 && kCols % g == 0 ? g : 64;
}
const int64_t kGroup = Group();
const CodeFormat kFormats[] = {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8,
                               CodeFormat::kTernary};

size_t PoolBytes() {
  const char* env = std::getenv("TQ_PK_MIB");
  const size_t mib = env ? size_t(std::atoll(env)) : 1024;
  return (mib > 0 ? mib : 1024) << 20;
}

// Random bytes (every byte pattern is valid q2/q3/q4/q8 codes) and valid fp16 scales.
struct Pool {
  tq::AlignedBuffer<uint8_t> codes;
  tq::AlignedBuffer<uint16_t> scales;
  Pool() {
    codes.resize(PoolBytes());
    std::mt19937_64 rng(1);
    auto* w = reinterpret_cast<uint64_t*>(codes.data());
    for (size_t i = 0; i < codes.size() / 8; ++i) w[i] = rng();
    scales.resize(codes.size() / 8);  // >= 1/16 code bytes per scale byte for g >= 32 at q4
    for (size_t i = 0; i < scales.size(); ++i)
      scales[i] = tq::F32ToF16(0.01f + float(i % 7) * 1e-3f);
  }
};
Pool& GetPool() {
  static Pool p;
  return p;
}

// As many [kRows, kCols] matrices of format f as fit in the pool.
std::vector<PackedMatrix> Matrices(CodeFormat f, int64_t max_count) {
  Pool& p = GetPool();
  const int64_t rb = int64_t(tq::quant::PackedBytes(f, kCols));
  const int64_t code_bytes = kRows * rb, scale_count = kRows * (kCols / kGroup);
  const int64_t count = std::min<int64_t>(
      max_count,
      std::min(int64_t(p.codes.size()) / code_bytes, int64_t(p.scales.size()) / scale_count));
  std::vector<PackedMatrix> ms;
  for (int64_t i = 0; i < count; ++i) {
    PackedMatrix m;
    m.format = f;
    m.rows = kRows;
    m.cols = kCols;
    m.group_size = kGroup;
    m.codes = p.codes.data() + i * code_bytes;
    m.row_bytes = rb;
    m.scales = p.scales.data() + i * scale_count;
    // TQ_PK_Q8=linear: q8 with convert's linear codebook (the int8 kernels' no-lookup path).
    const char* q8 = std::getenv("TQ_PK_Q8");
    m.codebook = f == CodeFormat::kQ8 && q8 && std::string(q8) == "linear"
                     ? tq::quant::LinearQ8Codebook().levels.data()
                     : tq::quant::GaussianCodebook(f).levels.data();
    ms.push_back(m);
  }
  return ms;
}

int64_t MatrixBytes(const PackedMatrix& m) {
  return m.rows * m.row_bytes + m.rows * (m.cols / m.group_size) * 2;
}

void BM_Decode(benchmark::State& state) {
  const CodeFormat f = kFormats[state.range(0)];
  const Isa want = Isa(state.range(1));
  tq::ThreadPool::SetGlobalThreads(int(state.range(2)));
  const Isa saved = tq::kernels::cpu::ActiveIsa();  // restored below (AMX for the later benches)
  if (tq::kernels::cpu::SetActiveIsa(want) != want) {
    tq::kernels::cpu::SetActiveIsa(saved);
    state.SkipWithError("ISA not available");
    return;
  }
  const std::vector<PackedMatrix> ms = Matrices(f, 1 << 20);
  std::vector<float> x(kCols), y(kRows);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    for (const PackedMatrix& m : ms) tq::kernels::PackedMatMul(x.data(), 1, m, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(ms.size()) * MatrixBytes(ms[0]));
  state.counters["Gweights/s"] =
      benchmark::Counter(double(state.iterations()) * double(ms.size()) * kRows * kCols * 1e-9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(tq::quant::Traits(f).name) + " " +
                 std::string(tq::kernels::cpu::IsaName(want)));
  tq::kernels::cpu::SetActiveIsa(saved);
}

void BM_Prefill(benchmark::State& state) {
  const CodeFormat f = kFormats[state.range(0)];
  tq::ThreadPool::SetGlobalThreads(int(state.range(1)));
  const int64_t n = 128;
  const PackedMatrix m = Matrices(f, 1)[0];
  std::vector<float> x(size_t(n * kCols)), y(size_t(n * kRows));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    tq::kernels::PackedMatMul(x.data(), n, m, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(state.iterations()) * 2.0 * n * kRows * kCols * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(tq::quant::Traits(f).name));
}

void BM_DecodeHot(benchmark::State& state) {
  const CodeFormat f = kFormats[state.range(0)];
  tq::ThreadPool::SetGlobalThreads(int(state.range(1)));
  const int64_t n = state.range(2);
  PackedMatrix m = Matrices(f, 1)[0];
  m.rows = 1024;
  std::vector<float> x(size_t(n * kCols)), y(size_t(n * m.rows));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    tq::kernels::PackedMatMul(x.data(), n, m, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["Gweights/s"] =
      benchmark::Counter(double(state.iterations()) * double(n) * double(m.rows) * kCols * 1e-9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(tq::quant::Traits(f).name) + " n=" + std::to_string(n));
}

// Read bandwidth over the same pool (64-bit sums, split over the threads).
void BM_Read(benchmark::State& state) {
  tq::ThreadPool pool(int(state.range(0)));
  Pool& p = GetPool();
  const auto* a = reinterpret_cast<const uint64_t*>(p.codes.data());
  const int64_t n = int64_t(p.codes.size() / 8);
  std::vector<uint64_t> partial(size_t(pool.size()) * 8, 0);
  for (auto _ : state) {
    pool.Run(pool.size(), [&](int64_t task, int) {
      const int64_t b = n * task / pool.size(), e = n * (task + 1) / pool.size();
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = b; i + 4 <= e; i += 4) {
        s0 += a[i];
        s1 += a[i + 1];
        s2 += a[i + 2];
        s3 += a[i + 3];
      }
      partial[size_t(task) * 8] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 8);
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int f = 0; f < 5; ++f)
      for (int isa : {2, 1, 0}) b->Args({f, isa, t});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}
void PrefillArgs(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int f = 0; f < 4; ++f) b->Args({f, t});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

void HotArgs(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int f = 0; f < 5; ++f)
      for (int n : {1, 2, 4, 7, 8, 16, 17}) b->Args({f, t, n});
  b->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(0.2);
}

BENCHMARK(BM_Read)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_Decode)->Apply(DecodeArgs);
BENCHMARK(BM_Prefill)->Apply(PrefillArgs);
BENCHMARK(BM_DecodeHot)->Apply(HotArgs);

}  // namespace

BENCHMARK_MAIN();
