#include "server/elastic_task_queue.h"

#include <malloc.h>

#include <algorithm>
#include <system_error>
#include <utility>

namespace tq::server {

ElasticTaskQueue::ElasticTaskQueue(ElasticTaskQueueOptions opts) : opts_(opts) {
  opts_.max_threads = std::max<size_t>(opts_.max_threads, 1);
  opts_.min_threads = std::min(opts_.min_threads, opts_.max_threads);
}

ElasticTaskQueue::~ElasticTaskQueue() { shutdown(); }

void ElasticTaskQueue::ReapExitedLocked() {
  // Join threads that have returned from Worker (they no longer touch this object's state
  // except the final unlock, which completed before they were listed).
  for (size_t slot : exited_) {
    if (threads_[slot].joinable()) threads_[slot].join();
  }
  exited_.clear();
}

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (shutdown_) return;
  tasks_.push_back(std::move(fn));
  // The queued tasks not yet claimed by an idle thread need new threads, as far as allowed.
  // (Idle threads each claim one once woken; if the system refuses a thread the task waits
  // for a live one, or for shutdown.)
  if (tasks_.size() > idle_ && live_ < opts_.max_threads && SpawnLocked()) return;
  lock.unlock();
  work_cv_.notify_one();
}

bool ElasticTaskQueue::SpawnLocked() {
  ReapExitedLocked();
  size_t slot = threads_.size();
  for (size_t i = 0; i < threads_.size(); ++i) {
    if (!threads_[i].joinable()) {
      slot = i;
      break;
    }
  }
  if (slot == threads_.size()) threads_.emplace_back();
  try {
    threads_[slot] = std::thread([this, slot] { Worker(slot); });
  } catch (const std::system_error&) {
    return false;  // EAGAIN: out of threads or memory for a stack
  }
  ++live_;
  peak_ = std::max(peak_, live_);
  return true;
}

void ElasticTaskQueue::Worker(size_t slot) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (tasks_.empty()) {
      if (shutdown_) break;
      ++idle_;
      const bool woke =
          work_cv_.wait_for(lock, opts_.idle_timeout, [&] { return !tasks_.empty() || shutdown_; });
      --idle_;
      if (!woke && live_ > opts_.min_threads) break;  // idle too long and above the floor
      continue;
    }
    std::function<void()> fn = std::move(tasks_.front());
    tasks_.pop_front();
    ++busy_;
    lock.unlock();
    fn();
    fn = nullptr;  // destroy the task's captures outside the lock
    lock.lock();
    if (--busy_ == 0 && tasks_.empty() && opts_.trim_heap_when_idle) {
      // The last busy thread went idle: give the freed heap of every arena back to the system.
      lock.unlock();
      malloc_trim(0);
      lock.lock();
    }
  }
  --live_;
  exited_.push_back(slot);
  work_cv_.notify_all();  // shutdown() waits for live_ == 0
}

void ElasticTaskQueue::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  shutdown_ = true;
  work_cv_.notify_all();
  work_cv_.wait(lock, [&] { return live_ == 0; });
  ReapExitedLocked();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

size_t ElasticTaskQueue::live_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}
size_t ElasticTaskQueue::busy_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}
size_t ElasticTaskQueue::queued_tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}
size_t ElasticTaskQueue::peak_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace tq::server
