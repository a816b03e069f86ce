// The server's batched decode step (Model::DecodeBatch: one new token for each of `rows`
// sequences, one pass over the weights) against the number of rows, on a real model directory:
// - BM_DecodeBatch/rows/threads: ms per step and rows/s (aggregate decode tokens/s of a server
//   with that many streaming clients, sampling and HTTP left out). Each cache holds
//   TQ_DB_CONTEXT (default 128) synthetic positions; every step is rolled back, so the context
//   stays fixed.
// - BM_PackedRows/rows/chunk/threads: the kernel under it, y [rows, 8192] = x · Ŵᵀ for one
//   [8192, 2048] q4 g64 matrix (Llama-3.2-1B's MLP shape), the rows in one call (chunk 0) or in
//   calls of at most `chunk` rows: shows which path PackedMatMul takes for 8-16 rows.
// - BM_Int8Paths/rows/path/isa: the same matrix through one int8 kernel directly, 1 thread, at
//   the isa level (1 avx2, 2 avx512): path 0 the decode kernel (cpu/packed_decode.h, calls of at
//   most 16 rows), path 1 the prefill GEMM (cpu/packed_prefill.h); sets where PackedMatMul
//   switches.
// Model: TQ_DB_MODEL (default /work/runtime-data/fastk/tq4-g64, a synth Llama-3.2-1B converted
// with --bits 4 --group-size 64 --embed-bits 8); KV cache: TQ_DB_KV_BITS (default: f16 cache).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_decode.h"
#include "kernels/cpu/packed_prefill.h"
#include "kernels/packed_ops.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace {

constexpr int kMaxRows = 16;

std::string Env(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

struct Loaded {
  std::unique_ptr<tq::Model> model;
  std::vector<std::unique_ptr<tq::KvCache>> caches;
  std::vector<float> logits;
  int64_t context = 0;
};

Loaded& Get() {
  static Loaded l = [] {
    Loaded x;
    x.model = tq::Model::Load(Env("TQ_DB_MODEL", "/work/runtime-data/fastk/tq4-g64"));
    x.context = std::atoll(Env("TQ_DB_CONTEXT", "128").c_str());
    tq::KvCacheOptions o;
    o.max_tokens = x.context + 8;
    const double bits = std::atof(Env("TQ_DB_KV_BITS", "0").c_str());
    o.k_bits = o.v_bits = bits;
    for (int i = 0; i < kMaxRows; ++i) {
      x.caches.push_back(x.model->NewCache(o));
      x.caches.back()->FillSynthetic(x.context, uint64_t(i + 1));
    }
    x.logits.resize(size_t(kMaxRows) * size_t(x.model->vocab_size()));
    // Warm-up: fault in the mapped weights before any timing.
    std::vector<tq::KvCache*> all;
    for (auto& c : x.caches) all.push_back(c.get());
    const std::vector<int32_t> tokens(size_t(kMaxRows), 1);
    x.model->DecodeBatch(tokens, all, x.logits.data());
    for (tq::KvCache* c : all) c->Truncate(x.context);
    return x;
  }();
  return l;
}

void BM_DecodeBatch(benchmark::State& state) {
  const int rows = int(state.range(0));
  tq::ThreadPool::SetGlobalThreads(int(state.range(1)));
  Loaded& l = Get();
  std::vector<tq::KvCache*> caches;
  std::vector<int32_t> tokens;
  for (int i = 0; i < rows; ++i) {
    caches.push_back(l.caches[size_t(i)].get());
    tokens.push_back(int32_t((1000 + 37 * i) % l.model->vocab_size()));
  }
  for (auto _ : state) {
    l.model->DecodeBatch(tokens, caches, l.logits.data());
    state.PauseTiming();
    for (tq::KvCache* c : caches) c->Truncate(l.context);
    state.ResumeTiming();
  }
  state.counters["rows/s"] =
      benchmark::Counter(double(state.iterations()) * rows, benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(rows) + " rows");
}

// One [8192, 2048] q4 matrix of random codes and plausible scales; groups of 64, or
// TQ_DB_GROUP (convert's default is 128).
struct Matrix {
  tq::AlignedBuffer<uint8_t> codes;
  tq::AlignedBuffer<uint16_t> scales;
  tq::kernels::PackedMatrix m;
  Matrix() {
    constexpr int64_t kRows = 8192, kCols = 2048;
    const int64_t kGroup = std::atoll(Env("TQ_DB_GROUP", "64").c_str());
    m.format = tq::quant::CodeFormat::kQ4;
    m.rows = kRows;
    m.cols = kCols;
    m.group_size = kGroup;
    m.row_bytes = int64_t(tq::quant::PackedBytes(m.format, kCols));
    codes.resize(size_t(kRows * m.row_bytes));
    scales.resize(size_t(kRows * (kCols / kGroup)));
    std::mt19937_64 rng(1);
    for (auto& b : codes) b = uint8_t(rng());
    for (size_t i = 0; i < scales.size(); ++i)
      scales[i] = tq::F32ToF16(0.01f + float(i % 7) * 1e-3f);
    m.codes = codes.data();
    m.scales = scales.data();
    m.codebook = tq::quant::GaussianCodebook(m.format).levels.data();
  }
};

void BM_PackedRows(benchmark::State& state) {
  static Matrix w;
  const int64_t rows = state.range(0), chunk = state.range(1) > 0 ? state.range(1) : rows;
  tq::ThreadPool::SetGlobalThreads(int(state.range(2)));
  const tq::kernels::PackedMatrix& m = w.m;
  std::vector<float> x(size_t(rows * m.cols)), y(size_t(rows * m.rows));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      tq::kernels::PackedMatMul(x.data() + r0 * m.cols, n, m, nullptr, y.data() + r0 * m.rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(double(state.iterations()) * double(rows), benchmark::Counter::kIsRate);
}

void BM_Int8Paths(benchmark::State& state) {
  static Matrix w;
  const int64_t rows = state.range(0);
  const bool gemm = state.range(1) != 0;
  tq::ThreadPool::SetGlobalThreads(1);
  namespace cpu = tq::kernels::cpu;
  const cpu::Isa saved = cpu::ActiveIsa(), want = cpu::Isa(state.range(2));
  if (cpu::SetActiveIsa(want) != want) {
    cpu::SetActiveIsa(saved);
    state.SkipWithError("ISA level not available on this CPU");
    return;
  }
  const tq::kernels::PackedMatrix& m = w.m;
  std::vector<float> x(size_t(rows * m.cols)), y(size_t(rows * m.rows));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    if (gemm) {
      cpu::PrefillInt8MatMul(x.data(), rows, m, nullptr, y.data());
    } else {
      for (int64_t r0 = 0; r0 < rows; r0 += cpu::kFastDecodeMaxTokens)
        cpu::FastPackedDecode(x.data() + r0 * m.cols,
                              std::min(cpu::kFastDecodeMaxTokens, rows - r0), m, nullptr,
                              y.data() + r0 * m.rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  cpu::SetActiveIsa(saved);
  state.SetLabel(std::string(gemm ? "int8 gemm " : "int8 decode ") +
                 std::string(cpu::IsaName(want)));
}

void DecodeBatchArgs(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int rows : {1, 2, 4, 8, 12, 16}) b->Args({rows, t});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
}
void PackedRowsArgs(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int rows : {1, 2, 4, 7, 8, 12, 16, 32, 64}) {
      b->Args({rows, 0, t});
      if (rows > 7) b->Args({rows, 7, t});
    }
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
}

BENCHMARK(BM_PackedRows)->Apply(PackedRowsArgs);
BENCHMARK(BM_Int8Paths)
    ->ArgsProduct({{1, 2, 4, 5, 6, 7, 8, 12, 16, 24, 32, 64}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3);
BENCHMARK(BM_DecodeBatch)->Apply(DecodeBatchArgs);

}  // namespace

BENCHMARK_MAIN();
