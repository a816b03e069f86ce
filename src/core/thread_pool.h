// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a
// pool of size N has N-1 workers. Idle workers sleep on a condition variable (after a short spin,
// which keeps per-token latency low without burning cores between requests).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tq {

class ThreadPool {
 public:
  // num_threads <= 0 means all hardware threads.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Runs fn(task, thread) for every task in [0, num_tasks); thread in [0, size()). Blocks until
  // all are done; rethrows the first exception. Called from inside a task it runs serially;
  // concurrent callers from other threads take turns.
  void Run(int64_t num_tasks, const std::function<void(int64_t task, int thread)>& fn);

  // Splits [0, n) into about size() contiguous chunks of at least `grain` items; fn(begin, end).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool used by kernels. SetGlobalThreads replaces it (not while it runs).
  static ThreadPool& Global();
  static void SetGlobalThreads(int num_threads);

 private:
  void WorkerLoop(int thread);
  void DoTasks(int thread);

  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // one Run at a time (callers from several threads queue here)
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped per Run; guarded by mu_
  bool stop_ = false;
  std::atomic<uint64_t> gen_seen_{0};  // published generation for spinning workers

  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_{0};
  bool closed_ = true;          // the current job takes no more workers; guarded by mu_
  std::atomic<int> joined_{0};  // workers inside the current job (changed under mu_)
  std::exception_ptr error_;
  std::mutex error_mu_;
};

// Number of hardware threads (at least 1).
int HardwareThreads();

}  // namespace tq
