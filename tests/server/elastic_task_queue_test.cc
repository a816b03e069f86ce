// The HTTP connection pool (server/elastic_task_queue.h): grows only when every thread is busy,
// caps at max_threads (the rest queue, FIFO), shrinks to min_threads after the idle timeout,
// runs every queued task on shutdown.
#include "server/elastic_task_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tq::server {
namespace {

using namespace std::chrono_literals;

// Blocks the tasks that call Wait() until Open().
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool AwaitWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 1000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return f();
}

TEST(ElasticTaskQueue, StartsNoThreadUntilWorkArrivesAndReusesAnIdleOne) {
  ElasticTaskQueue q({.min_threads = 2, .max_threads = 8, .idle_timeout = 10s});
  EXPECT_EQ(q.live_threads(), 0u);
  std::atomic<int> done{0};
  for (int i = 0; i < 20; ++i) {
    q.enqueue([&] { ++done; });
    ASSERT_TRUE(Eventually([&] { return done == i + 1; }));
  }
  // One task at a time: an idle thread is always there to take the next one.
  EXPECT_EQ(q.peak_threads(), 1u);
  q.shutdown();
}

TEST(ElasticTaskQueue, GrowsWhileAllAreBusyUpToTheCapThenQueuesInOrder) {
  ElasticTaskQueue q({.min_threads = 1, .max_threads = 4, .idle_timeout = 10s});
  Gate gate;
  std::mutex order_mu;
  std::vector<int> order;
  for (int i = 0; i < 4; ++i) q.enqueue([&] { gate.Wait(); });
  ASSERT_TRUE(gate.AwaitWaiting(4));
  EXPECT_EQ(q.live_threads(), 4u);
  EXPECT_EQ(q.busy_threads(), 4u);
  for (int i = 0; i < 6; ++i) {
    q.enqueue([&, i] {
      std::lock_guard<std::mutex> lock(order_mu);
      order.push_back(i);
    });
  }
  EXPECT_EQ(q.live_threads(), 4u) << "the cap holds: the rest wait";
  EXPECT_EQ(q.queued_tasks(), 6u);
  gate.Open();
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(order_mu);
    return order.size() == 6;
  }));
  EXPECT_EQ(q.peak_threads(), 4u);
  // FIFO: tasks are taken in the order they came (several threads may finish them out of order,
  // but with one thread free at a time they start in order; just check all ran once).
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  q.shutdown();
}

TEST(ElasticTaskQueue, ShrinksToTheFloorAfterTheIdleTimeout) {
  ElasticTaskQueue q({.min_threads = 2, .max_threads = 16, .idle_timeout = 50ms});
  Gate gate;
  for (int i = 0; i < 10; ++i) q.enqueue([&] { gate.Wait(); });
  ASSERT_TRUE(gate.AwaitWaiting(10));
  EXPECT_EQ(q.live_threads(), 10u);
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return q.live_threads() == 2; })) << q.live_threads();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(q.live_threads(), 2u) << "never below min_threads";
  // The survivors still take work, and the freed slots are reused.
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) q.enqueue([&] { ++done; });
  EXPECT_TRUE(Eventually([&] { return done == 5; }));
  q.shutdown();
  EXPECT_EQ(q.live_threads(), 0u);
}

TEST(ElasticTaskQueue, ShutdownRunsWhatIsQueuedAndDropsLaterTasks) {
  std::atomic<int> done{0};
  {
    ElasticTaskQueue q({.min_threads = 0, .max_threads = 1, .idle_timeout = 10s});
    Gate gate;
    q.enqueue([&] {
      gate.Wait();
      ++done;
    });
    ASSERT_TRUE(gate.AwaitWaiting(1));
    for (int i = 0; i < 3; ++i) q.enqueue([&] { ++done; });
    std::thread opener([&] {
      std::this_thread::sleep_for(50ms);
      gate.Open();
    });
    q.shutdown();  // waits for the blocked task and runs the three queued ones
    opener.join();
    EXPECT_EQ(done, 4);
    q.enqueue([&] { ++done; });  // after shutdown: dropped, no thread started
    EXPECT_EQ(q.live_threads(), 0u);
    q.shutdown();  // idempotent
  }
  EXPECT_EQ(done, 4);
}

TEST(ElasticTaskQueue, ZeroCapMeansOneThread) {
  ElasticTaskQueue q({.min_threads = 5, .max_threads = 0, .idle_timeout = 10s});
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) q.enqueue([&] { ++done; });
  EXPECT_TRUE(Eventually([&] { return done == 3; }));
  EXPECT_EQ(q.peak_threads(), 1u);
}

}  // namespace
}  // namespace tq::server
