// Continuous batching: one thread owns the Engine and runs up to `parallel` sequences together.
// Each step it (1) drops cancelled sequences, (2) admits queued ones into free slots, reusing the
// KV cache of a finished sequence that shares the longest prompt prefix, and (3) runs ONE
// Engine::Step (one pass over the weights) holding a token for every sequence past its prompt
// and up to `prefill_chunk` prompt tokens of the others, oldest first (so a long prompt never
// stalls the others for long, and prompts that arrive together are prefilled together).
// Requests beyond the running ones wait in a bounded FIFO queue. The server runs it on its own
// thread; the Generator (one sequence, the CLI and the library) drives it on the caller's thread
// with RunUntilIdle, so both share admission, sampling, eos / length / stop handling and stats.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"

namespace tq {

struct SchedulerOptions {
  int parallel = 4;             // sequences decoded together (<= engine.num_caches())
  int max_queue = 64;           // waiting sequences beyond those; more -> Submit fails
  int64_t prefill_chunk = 256;  // prompt tokens prefilled per step
  // false: no thread; the caller runs the queued sequences with RunUntilIdle().
  bool own_thread = true;
};

struct SequenceRequest {
  std::vector<int32_t> prompt;  // 1 <= size < engine context
  int64_t max_tokens = 0;       // <= 0: up to the context; clamped to the room left
  std::unique_ptr<TokenSampler> sampler;
  std::vector<int32_t> eos_tokens;  // generation stops (reason kStop) on any of these
  int top_logprobs = -1;            // < 0: no logprobs; else how many alternatives
  std::shared_ptr<SequenceSink> sink;
};

// Counters for /metrics (monotonic totals and current gauges).
struct SchedulerStats {
  int64_t sequences_total = 0;  // admitted to a slot
  // finished_stop counts eos ids and stop strings (both are OpenAI's "stop").
  int64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_error = 0;
  int64_t rejected_total = 0;        // Submit refused (queue full)
  int64_t prompt_tokens_total = 0;   // of admitted sequences
  int64_t prefill_tokens_total = 0;  // prompt tokens actually computed
  int64_t cached_tokens_total = 0;   // prompt tokens reused from a kept cache
  int64_t generated_tokens_total = 0;
  int64_t decode_steps_total = 0;  // steps with a token for running sequences
  // Time in those steps (prompt chunks batched into them included), and in prompt-only steps.
  double decode_seconds_total = 0, prefill_seconds_total = 0;
  // Time to first token (submit -> first token) and queue wait (submit -> slot), summed over
  // the sequences that got that far: mean = sum / count.
  double ttft_seconds_sum = 0, queue_seconds_sum = 0;
  int64_t ttft_count = 0;
  double tokens_per_second = 0;  // generated tokens/s over the last few seconds
  int queued = 0, active = 0;
  int64_t kv_tokens_active = 0;  // tokens in the caches of running sequences
  int64_t kv_tokens_total = 0;   // in all caches, including the kept ones
  int64_t kv_capacity_tokens = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_bytes = -1;  // Engine::kv_bytes_held (< 0: unknown)
};

class Scheduler {
 public:
  Scheduler(Engine& engine, const SchedulerOptions& opts);
  ~Scheduler();  // Stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the sequences (all or none: several prompts of one request). False when the queue
  // has no room for all of them; their sinks are then not called.
  bool Submit(std::vector<SequenceRequest> reqs);

  SchedulerStats Stats() const;
  // The engine's accelerator memory (Engine::device_memory), for /metrics.
  std::optional<Engine::DeviceMemory> DeviceMemory() const { return engine_.device_memory(); }
  const SchedulerOptions& options() const { return opts_; }

  // Without own_thread: runs steps on this thread until nothing is queued or running.
  void RunUntilIdle();

  // Finishes every queued and running sequence as kCancelled and joins the thread.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    SequenceRequest req;
    Clock::time_point submitted;
  };
  struct Sequence {
    SequenceRequest req;
    Clock::time_point submitted;
    int cache = -1;
    int64_t prefilled = 0;  // prompt tokens in the cache
    int64_t generated = 0;
    int32_t next_token = -1;                    // sampled, not yet in the cache
    FinishReason reason = FinishReason::kStop;  // set when SampleAndEmit returns false
    std::string error;
    std::exception_ptr exception;  // what caused a kError, when an exception did
    SequenceStats stats;
  };
  struct CacheSlot {
    std::vector<int32_t> tokens;  // exactly what its KV holds
    bool busy = false;
    uint64_t last_used = 0;
  };

  void Loop();
  // Step() with a guard: whatever escapes fails the running sequences, never the caller.
  void GuardedStep();
  // Finishes what is running and queued as kCancelled (the thread's end, or Stop without one).
  void Drain();
  void Step();
  // Runs batch_parts_ in one Engine::Step, then samples and finishes sequences.
  void RunStep(bool decoding, int64_t prompt_tokens);
  void Admit(Pending p);
  // Samples from `logits` [vocab] for seq; emits the token; false when the sequence finished.
  // `scratch` picks a row of the logprob buffers: calls with distinct rows may run at once.
  bool SampleAndEmit(Sequence& seq, float* logits, size_t scratch);
  void Finish(size_t index, FinishReason reason, const std::string& error = "",
              std::exception_ptr exception = nullptr);
  void UpdateGauges();

  Engine& engine_;
  const SchedulerOptions opts_;
  const int64_t vocab_;
  const int64_t context_;

  mutable std::mutex mu_;  // guards queue_, stats_, stop_
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  SchedulerStats stats_;

  // Scheduler thread only.
  std::vector<std::unique_ptr<Sequence>> active_;
  std::vector<CacheSlot> caches_;
  uint64_t use_clock_ = 0;
  std::vector<float> logits_;              // [parallel, vocab]
  std::vector<float> logprob_tmp_;         // [vocab]
  std::vector<int32_t> index_tmp_;         // [vocab]
  std::vector<int32_t> batch_tokens_;      // the step's tokens, parts back to back
  std::vector<Engine::Part> batch_parts_;  // one per sequence in the step
  std::vector<size_t> batch_seqs_;         // per part: index in active_
  std::vector<size_t> batch_rows_;         // per logits row: its part
  std::vector<uint8_t> batch_alive_;       // per part: still generating after this step
  std::vector<size_t> dead_;
  std::deque<std::pair<Clock::time_point, int64_t>> rate_window_;  // (time, generated total)

  std::thread thread_;
};

}  // namespace tq
