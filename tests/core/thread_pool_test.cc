#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tq {
namespace {

TEST(ThreadPool, RunsEveryTaskOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int>> hits(1000);
      pool.Run(1000, [&](int64_t t, int th) {
        EXPECT_GE(th, 0);
        EXPECT_LT(th, threads);
        hits[t]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, ParallelForCoversRange) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
    std::vector<int> seen(size_t(n), 0);
    pool.ParallelFor(n, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[size_t(i)]++;
    });
    for (int v : seen) EXPECT_EQ(v, 1);
  }
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.Run(100,
                        [](int64_t t, int) {
                          if (t == 37) throw std::runtime_error("boom");
                        }),
               std::runtime_error);
  // Still usable afterwards.
  std::atomic<int> n{0};
  pool.Run(10, [&](int64_t, int) { n++; });
  EXPECT_EQ(n.load(), 10);
}

TEST(ThreadPool, NestedRunIsSerial) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  pool.Run(4, [&](int64_t, int) { pool.Run(5, [&](int64_t, int) { n++; }); });
  EXPECT_EQ(n.load(), 20);
}

TEST(ThreadPool, ConcurrentCallersTakeTurns) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r) pool.Run(8, [&](int64_t, int) { n++; });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(n.load(), 4 * 20 * 8);
}

TEST(ThreadPool, ManyTinyJobsWithMoreThreadsThanCores) {
  // Workers often wake after the caller has finished a job (oversubscribed machine): they must
  // skip it, never run a task twice or touch a finished job.
  ThreadPool pool(8);
  for (int rep = 0; rep < 3000; ++rep) {
    std::vector<std::atomic<int>> hits(3);
    pool.Run(3, [&](int64_t t, int) { hits[size_t(t)]++; });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "rep " << rep;
  }
}

}  // namespace
}  // namespace tq
