// The HTTP server's connection threads: a pool that grows with demand and shrinks when idle.
//
// cpp-httplib runs each connection on a task-queue thread for as long as the connection lives
// (its headers, its body, keep-alive waits, a whole stream). A fixed pool large enough to ride
// out slow clients (docs/RELIABILITY.md: slowloris) keeps hundreds of threads alive forever, and
// as requests land on ever more of them each one's touched stack pages and malloc arena stay
// resident: the server's RSS creeps up over a long soak. This queue starts threads only when
// every live thread is busy (up to max_threads; beyond that tasks wait in FIFO order), lets a
// thread above min_threads exit after idle_timeout without work, and returns freed heap to the
// system (malloc_trim) when the pool drains.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tq::server {

struct ElasticTaskQueueOptions {
  size_t min_threads = 8;    // kept alive while idle
  size_t max_threads = 512;  // live threads at most; tasks beyond wait in the queue
  std::chrono::milliseconds idle_timeout{10000};  // a thread above min_threads exits after this
  bool trim_heap_when_idle = true;                // malloc_trim(0) when the last busy thread idles
};

class ElasticTaskQueue : public httplib::TaskQueue {
 public:
  explicit ElasticTaskQueue(ElasticTaskQueueOptions opts);
  ~ElasticTaskQueue() override;  // shuts down (joins) if shutdown() was not called
  ElasticTaskQueue(const ElasticTaskQueue&) = delete;
  ElasticTaskQueue& operator=(const ElasticTaskQueue&) = delete;

  // Runs fn on an idle thread, a new thread (when all are busy and fewer than max_threads
  // live), or queues it. After shutdown() the task is dropped (httplib closes the socket).
  void enqueue(std::function<void()> fn) override;
  // Runs every queued task, then joins every thread. Idempotent.
  void shutdown() override;

  // For tests and /metrics: threads alive now, threads running a task now, tasks waiting.
  size_t live_threads() const;
  size_t busy_threads() const;
  size_t queued_tasks() const;
  size_t peak_threads() const;  // the most threads ever alive at once

 private:
  void Worker(size_t slot);
  void ReapExitedLocked();
  bool SpawnLocked();  // false when the system refused a new thread

  ElasticTaskQueueOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;  // slot-indexed; a finished thread's slot is reused
  std::vector<size_t> exited_;        // slots whose thread returned and awaits join
  size_t live_ = 0, busy_ = 0, idle_ = 0, peak_ = 0;
  bool shutdown_ = false;
};

}  // namespace tq::server
