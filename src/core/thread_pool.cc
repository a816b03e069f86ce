#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace tq {
namespace {
thread_local bool t_inside_pool = false;
std::unique_ptr<ThreadPool> g_pool;
std::mutex g_pool_mu;
constexpr int kSpinIterations = 20000;  // ~tens of microseconds before sleeping
}  // namespace

int HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = HardwareThreads();
  for (int t = 1; t < num_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::DoTasks(int thread) {
  t_inside_pool = true;
  for (;;) {
    const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= num_tasks_) break;
    try {
      (*fn_)(task, thread);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(num_tasks_, std::memory_order_relaxed);  // cancel the rest
    }
  }
  t_inside_pool = false;
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: consecutive Run calls (layer after layer) then start without a wake-up.
    for (int i = 0; i < kSpinIterations && gen_seen_.load(std::memory_order_acquire) == seen; ++i) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      // The caller already finished this job without us (we woke late): skip it.
      if (closed_) continue;
      joined_.fetch_add(1, std::memory_order_relaxed);
    }
    DoTasks(thread);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (joined_.fetch_sub(1, std::memory_order_acq_rel) == 1 && closed_) done_cv_.notify_all();
    }
  }
}

void ThreadPool::Run(int64_t num_tasks, const std::function<void(int64_t, int)>& fn) {
  if (num_tasks <= 0) return;
  if (workers_.empty() || num_tasks == 1 || t_inside_pool) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    num_tasks_ = num_tasks;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    closed_ = false;
    ++generation_;
    gen_seen_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  DoTasks(0);
  // Every task is claimed. Close the job so that workers which have not woken up yet skip it
  // (on a busy machine a descheduled worker must not hold up the caller), then wait only for
  // the workers that joined and may still be running a task.
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  for (int i = 0; i < kSpinIterations && joined_.load(std::memory_order_acquire) != 0; ++i) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  if (joined_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return joined_.load(std::memory_order_acquire) == 0; });
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  chunks = std::max<int64_t>(1, chunks);
  const int64_t per = (n + chunks - 1) / chunks;
  Run(chunks, [&](int64_t c, int) {
    const int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) fn(b, e);
  });
}

ThreadPool& ThreadPool::Global() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(0);
  return *g_pool;
}

void ThreadPool::SetGlobalThreads(int num_threads) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_pool = std::make_unique<ThreadPool>(num_threads);
}

}  // namespace tq
