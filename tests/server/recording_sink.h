// A SequenceSink for scheduler tests: records tokens, logprobs and how the sequence finished;
// can stop at a token or cancel after N tokens.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/scheduler.h"

namespace tq::server::test {

class RecordingSink : public SequenceSink {
 public:
  bool OnToken(int32_t token, const TokenLogprobs* lp) override {
    std::lock_guard lk(mu_);
    tokens.push_back(token);
    if (lp) logprobs.push_back(*lp);
    if (cancel_after > 0 && int(tokens.size()) >= cancel_after) cancelled = true;
    return stop_at < 0 || token != stop_at;
  }
  void OnFinish(FinishReason r, const SequenceStats& s, const std::string& e) override {
    std::lock_guard lk(mu_);
    ++finish_calls;
    finish_thread = std::this_thread::get_id();
    reason = r;
    stats = s;
    error = e;
    cv_.notify_all();
  }
  bool Cancelled() const override { return cancelled; }
  void OnException(std::exception_ptr e) override {
    std::lock_guard lk(mu_);
    exception = e;
  }
  // Waits for OnFinish; the timeout only matters when a test is failing (real-model tests
  // decode for seconds on a loaded machine).
  void Wait(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::unique_lock lk(mu_);
    ASSERT_TRUE(cv_.wait_for(lk, timeout, [&] { return finish_calls > 0; }));
  }

  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  int finish_calls = 0;
  FinishReason reason = FinishReason::kError;
  SequenceStats stats;
  std::string error;
  std::exception_ptr exception;   // OnException's
  std::thread::id finish_thread;  // where OnFinish ran
  int32_t stop_at = -1;
  int cancel_after = 0;
  std::atomic<bool> cancelled{false};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace tq::server::test
