// A deterministic stand-in for a model: the "logits" of a cache are a one-hot on
// (last token + 1) % vocab, so greedy generation counts upwards from the last prompt token.
// It records what it computed so tests can check batching and prefix reuse.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"

namespace tq::server::test {

class FakeEngine : public Engine {
 public:
  FakeEngine(int64_t vocab, int64_t context, int caches)
      : vocab_(vocab), context_(context), caches_(size_t(caches)) {}

  int64_t vocab_size() const override { return vocab_; }
  int64_t context_length() const override { return context_; }
  int num_caches() const override { return int(caches_.size()); }
  int64_t kv_bytes_per_token() const override { return 16; }
  std::optional<DeviceMemory> device_memory() const override { return fake_device; }
  std::optional<DeviceMemory> fake_device;  // set before Start: a GPU as /metrics shows it
  void Truncate(int cache, int64_t n) override {
    if (fail_truncate && n > 0) throw std::runtime_error("fake: truncate failed");
    std::lock_guard lk(mu_);
    auto& c = caches_.at(size_t(cache));
    if (n > 0 && n < Floor(c)) throw std::runtime_error("fake: window positions dropped");
    if (n < int64_t(c.size())) c.resize(size_t(n));
  }
  int64_t ReusablePrefix(int cache, int64_t n) override {
    std::lock_guard lk(mu_);
    return n >= Floor(caches_.at(size_t(cache))) ? n : 0;
  }
  // > 0: behave like a sliding-window cache that keeps only its last `window` positions (it can be
  // truncated to 0 or to at least size - window).
  std::atomic<int64_t> window{0};
  void Prefill(int cache, std::span<const int32_t> tokens, float* logits) override {
    std::lock_guard lk(mu_);
    auto& c = caches_.at(size_t(cache));
    c.insert(c.end(), tokens.begin(), tokens.end());
    if (int64_t(c.size()) > context_) throw std::runtime_error("fake: cache overflow");
    prefilled_tokens += int64_t(tokens.size());
    log += 'P';
    ++prefill_calls;
    OneHot(c.back(), logits);
  }
  void Decode(std::span<const int32_t> tokens, std::span<const int> caches,
              float* logits) override {
    if (decode_delay_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(decode_delay_us));
    std::lock_guard lk(mu_);
    if (fail_decode) throw std::runtime_error("fake: decode failed");
    max_batch = std::max<int64_t>(max_batch, int64_t(tokens.size()));
    ++decode_calls;
    log += 'D';
    for (size_t b = 0; b < tokens.size(); ++b) {
      auto& c = caches_.at(size_t(caches[b]));
      c.push_back(tokens[b]);
      if (int64_t(c.size()) > context_) throw std::runtime_error("fake: cache overflow");
      OneHot(tokens[b], logits + b * size_t(vocab_));
    }
  }
  // Records how steps were batched, then runs the default (Prefill per prompt part, one Decode).
  void Step(std::span<const int32_t> tokens, std::span<const Part> parts, float* logits) override {
    int64_t prompt_parts = 0, decode_parts = 0;
    for (const Part& p : parts) (p.prompt ? prompt_parts : decode_parts)++;
    max_prompt_parts = std::max<int64_t>(max_prompt_parts, prompt_parts);
    if (prompt_parts > 0 && decode_parts > 0) ++mixed_steps;
    ++step_calls;
    Engine::Step(tokens, parts, logits);
  }
  std::vector<int32_t> CacheTokens(int c) {
    std::lock_guard lk(mu_);
    return caches_.at(size_t(c));
  }

  std::atomic<int64_t> prefilled_tokens{0}, prefill_calls{0}, decode_calls{0}, max_batch{0};
  std::atomic<int64_t> step_calls{0}, max_prompt_parts{0}, mixed_steps{0};
  std::atomic<bool> fail_decode{false}, fail_truncate{false};
  std::atomic<int> decode_delay_us{0};
  std::string log;  // 'P' per Prefill, 'D' per Decode, in order (guarded by mu_)
  std::string Log() {
    std::lock_guard lk(mu_);
    return log;
  }

 private:
  int64_t Floor(const std::vector<int32_t>& c) const {
    return window > 0 ? std::max<int64_t>(0, int64_t(c.size()) - window) : 0;
  }
  void OneHot(int32_t last, float* logits) const {
    for (int64_t i = 0; i < vocab_; ++i) logits[i] = 0.0f;
    logits[(last + 1) % vocab_] = 10.0f;
  }
  int64_t vocab_, context_;
  std::mutex mu_;
  std::vector<std::vector<int32_t>> caches_;
};

class GreedySampler : public TokenSampler {
 public:
  int32_t Sample(std::span<float> logits) override {
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
};

}  // namespace tq::server::test
