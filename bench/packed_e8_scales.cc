// e8 group scales (a u8 code per group into a per-tensor fp32 table) against fp16 scales on the
// same codes, interleaved inside every iteration (fp16 then e8, the order alternating) so the
// ratio holds on a loaded machine:
// - BM_E8Llama1B/<format>/<group>/<tokens>/<threads>: the 112 decoder linears of Llama-3.2-1B
//   (16 layers × q [2048, 2048], k, v [512, 2048], o [2048, 2048], gate, up [8192, 2048], down
//   [2048, 8192]; 0.97 G weights, the same random codes for both encodings), each run once per
//   encoding per iteration with `tokens` rows (1 = decode, 512 = prefill). Counters: tok/s of the
//   linears with fp16 and e8 scales, e8/f16 (> 1: e8 faster), and the bytes each reads.
//   Attention, norms and the LM head are not included (the same for both encodings).
// - BM_E8Hot/<format>/<group>/<tokens>: one [1024, 2048] matrix that stays in L2 (compute cost
//   alone), 1 thread, timed in thread CPU time; counters as above in Gweights/s.
// Formats: 0 q2, 1 q3, 2 q4, 3 q8, 4 ternary. The active ISA is the best this CPU has (or
// $TURBOQUANT_ISA).
#include <benchmark/benchmark.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/packed_ops.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace {

using tq::kernels::PackedMatrix;
using tq::quant::CodeFormat;

const CodeFormat kFormats[] = {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8,
                               CodeFormat::kTernary};

// One set of matrices with both scale encodings over the same codes.
struct Model {
  CodeFormat format{};
  int64_t group = 0;
  tq::AlignedBuffer<uint8_t> codes, scale_codes;
  tq::AlignedBuffer<uint16_t> scales;
  std::vector<float> table = std::vector<float>(256);
  std::vector<PackedMatrix> f16, e8;
  int64_t weights = 0, code_bytes = 0, groups = 0;
};

// Random codes (every byte is valid for q2/q3/q4/q8; ternary bytes < 243), e8 codes on a log
// grid table and the fp16 scales holding the same values.
void Build(Model* m, CodeFormat f, int64_t g,
           const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  m->format = f;
  m->group = g;
  m->weights = m->code_bytes = m->groups = 0;
  for (const auto& [rows, cols] : shapes) {
    m->weights += rows * cols;
    m->code_bytes += rows * int64_t(tq::quant::PackedBytes(f, cols));
    m->groups += rows * (cols / g);
  }
  m->codes.resize(size_t(m->code_bytes));
  m->scales.resize(size_t(m->groups));
  m->scale_codes.resize(size_t(m->groups));
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < m->codes.size(); ++i) {
    if (i % 8 == 0) {
      const uint64_t v = rng();
      for (size_t k = 0; k < 8 && i + k < m->codes.size(); ++k)
        m->codes[i + k] = uint8_t(v >> (8 * k));
    }
    if (f == CodeFormat::kTernary) m->codes[i] = uint8_t(m->codes[i] % 243);
  }
  for (int i = 0; i < 256; ++i) m->table[size_t(i)] = 1e-4f * std::exp2(float(i) / 16.0f);
  for (int64_t i = 0; i < m->groups; ++i) {
    const uint8_t c = uint8_t(60 + rng() % 80);
    m->scale_codes[size_t(i)] = c;
    m->scales[size_t(i)] = tq::F32ToF16(m->table[c]);
  }
  m->f16.clear();
  m->e8.clear();
  int64_t co = 0, so = 0;
  for (const auto& [rows, cols] : shapes) {
    PackedMatrix p;
    p.format = f;
    p.rows = rows;
    p.cols = cols;
    p.group_size = g;
    p.codes = m->codes.data() + co;
    p.row_bytes = int64_t(tq::quant::PackedBytes(f, cols));
    p.codebook = tq::quant::GaussianCodebook(f).levels.data();
    PackedMatrix q = p;
    p.scales = m->scales.data() + so;
    q.scale_codes = m->scale_codes.data() + so;
    q.scale_table = m->table.data();
    m->f16.push_back(p);
    m->e8.push_back(q);
    co += rows * p.row_bytes;
    so += rows * (cols / g);
  }
}

std::vector<std::pair<int64_t, int64_t>> Llama1BShapes() {
  std::vector<std::pair<int64_t, int64_t>> s;
  for (int l = 0; l < 16; ++l)
    for (auto rc : {std::pair<int64_t, int64_t>{2048, 2048},
                    {512, 2048},
                    {512, 2048},
                    {2048, 2048},
                    {8192, 2048},
                    {8192, 2048},
                    {2048, 8192}})
      s.push_back(rc);
  return s;
}

// The last model built (the 1B one is 0.5 GB at q4: one at a time).
Model& Get(CodeFormat f, int64_t g, bool llama) {
  static Model m;
  static bool is_llama = false;
  if (m.group != g || m.format != f || is_llama != llama) {
    m.group = 0;
    Build(&m, f, g,
          llama ? Llama1BShapes() : std::vector<std::pair<int64_t, int64_t>>{{1024, 2048}});
    is_llama = llama;
  }
  return m;
}

using Clock = std::chrono::steady_clock;

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Runs every matrix of `ms` on n tokens; returns wall seconds, or with cpu_time the calling
// thread's CPU seconds (1-thread runs: time lost to other processes is not counted).
double Pass(const std::vector<PackedMatrix>& ms, const float* x, int64_t n, float* y,
            bool cpu_time = false) {
  const auto t0 = Clock::now();
  const double c0 = cpu_time ? ThreadSeconds() : 0.0;
  for (const PackedMatrix& p : ms) tq::kernels::PackedMatMul(x, n, p, nullptr, y);
  benchmark::DoNotOptimize(y);
  if (cpu_time) return ThreadSeconds() - c0;
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void Report(benchmark::State& state, const Model& m, int64_t n, double t16, double t8, double unit,
            const char* name) {
  const double it = double(state.iterations());
  state.counters[std::string("f16_") + name] = it * unit / t16;
  state.counters[std::string("e8_") + name] = it * unit / t8;
  state.counters["e8/f16"] = t16 / t8;
  state.counters["f16_MB"] = double(m.code_bytes + 2 * m.groups) * 1e-6;
  state.counters["e8_MB"] = double(m.code_bytes + m.groups + 1024) * 1e-6;
  state.SetLabel(std::string(tq::quant::Traits(m.format).name) + " g" + std::to_string(m.group) +
                 " n=" + std::to_string(n));
}

void BM_E8Llama1B(benchmark::State& state) {
  const CodeFormat f = kFormats[state.range(0)];
  const int64_t g = state.range(1), n = state.range(2);
  tq::ThreadPool::SetGlobalThreads(int(state.range(3)));
  Model& m = Get(f, g, /*llama=*/true);
  std::vector<float> x(size_t(n * 8192)), y(size_t(n * 8192));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  Pass(m.f16, x.data(), n, y.data());  // warm up (pages, thread pool, AMX permission)
  Pass(m.e8, x.data(), n, y.data());
  double t16 = 0, t8 = 0;
  bool flip = false;
  for (auto _ : state) {
    if (flip) t8 += Pass(m.e8, x.data(), n, y.data());
    t16 += Pass(m.f16, x.data(), n, y.data());
    if (!flip) t8 += Pass(m.e8, x.data(), n, y.data());
    flip = !flip;
  }
  Report(state, m, n, t16, t8, double(n), "tok/s");
}

void BM_E8Hot(benchmark::State& state) {
  const CodeFormat f = kFormats[state.range(0)];
  const int64_t g = state.range(1), n = state.range(2);
  tq::ThreadPool::SetGlobalThreads(1);
  Model& m = Get(f, g, /*llama=*/false);
  std::vector<float> x(size_t(n * 2048)), y(size_t(n * 1024));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  double t16 = 0, t8 = 0;
  bool flip = false;
  for (auto _ : state) {
    for (int k = 0; k < 8; ++k) {
      if (flip) t8 += Pass(m.e8, x.data(), n, y.data(), true);
      t16 += Pass(m.f16, x.data(), n, y.data(), true);
      if (!flip) t8 += Pass(m.e8, x.data(), n, y.data(), true);
      flip = !flip;
    }
  }
  Report(state, m, n, t16, t8, 8.0 * double(n) * double(m.weights) * 1e-9, "Gweights/s");
}

void Llama1BArgs(benchmark::internal::Benchmark* b) {
  for (int64_t g : {64, 32}) {
    b->Args({2, g, 1, 2});
    b->Args({2, g, 512, 2});
  }
  for (int f : {0, 1}) b->Args({f, 16, 1, 2});      // q2 / q3 g16: 2.5 / 3.5 bits with e8
  b->Unit(benchmark::kMillisecond)->UseRealTime();  // --benchmark_min_time: 5 (decode), 10
}

void HotArgs(benchmark::internal::Benchmark* b) {
  for (int f = 0; f < 5; ++f)
    for (int64_t g : {16, 32, 64, 128})
      for (int64_t n : {1, 4, 16, 64}) b->Args({f, g, n});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_E8Llama1B)->Apply(Llama1BArgs);
BENCHMARK(BM_E8Hot)->Apply(HotArgs);

}  // namespace

BENCHMARK_MAIN();
