// Memory bandwidth of this machine: what decode speed is measured against (decode reads every
// weight once per token). Buffers of 1 GiB, well beyond the last-level cache reported by most
// servers (override with TQ_BW_MIB). Read: a sum over 64-bit words; copy: memcpy; both split
// across 1 thread and all threads of the pool. Bytes/s counts bytes read (+ written for copy).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"

namespace {

size_t BufferBytes() {
  const char* env = std::getenv("TQ_BW_MIB");
  const size_t mib = env ? size_t(std::atoll(env)) : 1024;
  return (mib > 0 ? mib : 1024) << 20;
}

struct Buffers {
  std::vector<uint64_t> a, b;
  Buffers() {
    const size_t n = BufferBytes() / sizeof(uint64_t);
    a.assign(n, 1);  // touch every page before timing
    b.assign(n, 2);
  }
};

Buffers& Bufs() {
  static Buffers bufs;
  return bufs;
}

void BM_Read(benchmark::State& state) {
  tq::ThreadPool pool(int(state.range(0)));
  auto& a = Bufs().a;
  const int64_t n = int64_t(a.size());
  std::vector<uint64_t> partial(size_t(pool.size()) * 8, 0);
  for (auto _ : state) {
    pool.Run(pool.size(), [&](int64_t task, int) {
      const int64_t begin = n * task / pool.size(), end = n * (task + 1) / pool.size();
      const uint64_t* p = a.data();
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = begin;
      for (; i + 4 <= end; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
      }
      for (; i < end; ++i) s0 += p[i];
      partial[size_t(task) * 8] = s0 + s1 + s2 + s3;  // one cache line per task
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * int64_t(sizeof(uint64_t)));
  state.counters["threads"] = pool.size();
}

void BM_Copy(benchmark::State& state) {
  tq::ThreadPool pool(int(state.range(0)));
  auto& a = Bufs().a;
  auto& b = Bufs().b;
  const int64_t n = int64_t(a.size());
  for (auto _ : state) {
    pool.Run(pool.size(), [&](int64_t task, int) {
      const int64_t begin = n * task / pool.size(), end = n * (task + 1) / pool.size();
      std::memcpy(b.data() + begin, a.data() + begin, size_t(end - begin) * sizeof(uint64_t));
    });
    benchmark::ClobberMemory();
  }
  // Read + write traffic.
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * n * int64_t(sizeof(uint64_t)));
  state.counters["threads"] = pool.size();
}

void ThreadArgs(benchmark::internal::Benchmark* b) {
  b->Arg(1);
  if (tq::HardwareThreads() > 1) b->Arg(tq::HardwareThreads());
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
}

BENCHMARK(BM_Read)->Apply(ThreadArgs);
BENCHMARK(BM_Copy)->Apply(ThreadArgs);

}  // namespace

BENCHMARK_MAIN();
