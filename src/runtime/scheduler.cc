#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/perplexity.h"

namespace tq {

namespace {

constexpr double kRateWindowSeconds = 5.0;

double SecondsBetween(std::chrono::steady_clock::time_point a,
                      std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// log-softmax of `logits` [vocab] into `out`; the chosen token's logprob and the top `k`.
void ComputeLogprobs(const float* logits, int64_t vocab, int k, int32_t chosen, float* out,
                     int32_t* index, TokenLogprobs& lp) {
  const float lse = float(LogSumExp(logits, vocab));
  for (int64_t i = 0; i < vocab; ++i) out[i] = logits[i] - lse;
  lp.logprob = out[chosen];
  lp.top.clear();
  if (k <= 0) return;
  k = int(std::min<int64_t>(k, vocab));
  for (int64_t i = 0; i < vocab; ++i) index[i] = int32_t(i);
  std::partial_sort(index, index + k, index + vocab,
                    [&](int32_t a, int32_t b) { return out[a] > out[b]; });
  for (int i = 0; i < k; ++i) lp.top.emplace_back(index[i], out[index[i]]);
}

}  // namespace

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& opts)
    : engine_(engine), opts_(opts), vocab_(engine.vocab_size()), context_(engine.context_length()) {
  TQ_CHECK(opts_.parallel >= 1, "scheduler", "parallel must be >= 1, got {}", opts_.parallel);
  TQ_CHECK(engine.num_caches() >= opts_.parallel, "scheduler",
           "the engine has {} KV caches, fewer than parallel={}", engine.num_caches(),
           opts_.parallel);
  TQ_CHECK(opts_.prefill_chunk >= 1, "scheduler", "prefill_chunk must be >= 1");
  caches_.resize(size_t(engine.num_caches()));
  logits_.resize(size_t(opts_.parallel) * size_t(vocab_));
  logprob_tmp_.resize(size_t(opts_.parallel) * size_t(vocab_));
  index_tmp_.resize(size_t(opts_.parallel) * size_t(vocab_));
  batch_alive_.resize(size_t(opts_.parallel));
  batch_tokens_.reserve(size_t(opts_.parallel + opts_.prefill_chunk));
  batch_parts_.reserve(size_t(opts_.parallel));
  batch_seqs_.reserve(size_t(opts_.parallel));
  batch_rows_.reserve(size_t(opts_.parallel));
  dead_.reserve(size_t(opts_.parallel));
  stats_.kv_capacity_tokens = int64_t(caches_.size()) * context_;
  stats_.kv_bytes_per_token = engine.kv_bytes_per_token();
  if (opts_.own_thread) thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Stop() {
  {
    std::lock_guard lk(mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  } else {
    Drain();
  }
}

void Scheduler::RunUntilIdle() {
  TQ_CHECK(!opts_.own_thread, "scheduler", "RunUntilIdle needs own_thread = false");
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stop_ || (queue_.empty() && active_.empty())) return;
    }
    GuardedStep();
  }
}

bool Scheduler::Submit(std::vector<SequenceRequest> reqs) {
  {
    std::lock_guard lk(mu_);
    if (stop_ || queue_.size() + reqs.size() > size_t(opts_.max_queue)) {
      stats_.rejected_total += int64_t(reqs.size());
      return false;
    }
    const auto now = Clock::now();
    for (auto& r : reqs) queue_.push_back(Pending{std::move(r), now});
    stats_.queued = int(queue_.size());
  }
  wake_.notify_all();
  return true;
}

SchedulerStats Scheduler::Stats() const {
  std::lock_guard lk(mu_);
  SchedulerStats s = stats_;
  const auto now = Clock::now();
  s.tokens_per_second = 0;
  // The window holds (time, generated total) after each step; idle time counts as zero rate.
  auto first = std::find_if(rate_window_.begin(), rate_window_.end(), [&](const auto& e) {
    return SecondsBetween(e.first, now) <= kRateWindowSeconds;
  });
  if (first != rate_window_.end()) {
    const double span = std::max(SecondsBetween(first->first, now), 0.5);
    s.tokens_per_second = double(rate_window_.back().second - first->second) / span;
  }
  return s;
}

void Scheduler::Loop() {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      wake_.wait(lk, [&] { return stop_ || !queue_.empty() || !active_.empty(); });
      if (stop_) break;
    }
    GuardedStep();
  }
  Drain();
}

void Scheduler::GuardedStep() {
  try {
    Step();
  } catch (const std::exception& e) {
    // Nothing a request does may take the server down: whatever escaped (an engine call
    // outside the guarded ones, say) fails the running sequences and empties their caches.
    const std::exception_ptr why = std::current_exception();
    for (size_t i = active_.size(); i-- > 0;) {
      const int c = active_[i]->cache;
      caches_[size_t(c)].tokens.clear();
      try {
        engine_.Truncate(c, 0);
      } catch (...) {
      }
      Finish(i, FinishReason::kError, std::string("scheduler: ") + e.what(), why);
    }
  }
}

void Scheduler::Drain() {
  // Shutting down: nobody will run what is left.
  for (size_t i = active_.size(); i-- > 0;) Finish(i, FinishReason::kCancelled);
  std::deque<Pending> left;
  {
    std::lock_guard lk(mu_);
    left.swap(queue_);
    stats_.queued = 0;
  }
  for (auto& p : left) p.req.sink->OnFinish(FinishReason::kCancelled, SequenceStats{}, "");
}

void Scheduler::Step() {
  // 1. Drop sequences nobody waits for: running ones free their slot, queued ones leave.
  for (size_t i = active_.size(); i-- > 0;) {
    if (active_[i]->req.sink->Cancelled()) Finish(i, FinishReason::kCancelled);
  }
  std::vector<Pending> dropped;
  {
    std::lock_guard lk(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->req.sink->Cancelled()) {
        dropped.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& p : dropped) {
    {
      std::lock_guard lk(mu_);
      ++stats_.finished_cancelled;
    }
    p.req.sink->OnFinish(FinishReason::kCancelled, SequenceStats{}, "");
  }

  // 2. Admit queued sequences into free slots.
  while (int(active_.size()) < opts_.parallel) {
    Pending p;
    {
      std::lock_guard lk(mu_);
      if (queue_.empty()) break;
      p = std::move(queue_.front());
      queue_.pop_front();
      stats_.queued = int(queue_.size());
    }
    Admit(std::move(p));
  }

  // 3. One engine step, one pass over the weights: a token for every sequence past its prompt,
  //    and up to prefill_chunk prompt tokens (oldest sequence first, so several short prompts
  //    that arrive together are prefilled together).
  batch_tokens_.clear();
  batch_parts_.clear();
  batch_seqs_.clear();
  for (size_t i = 0; i < active_.size(); ++i) {
    Sequence& seq = *active_[i];
    if (seq.prefilled < int64_t(seq.req.prompt.size()) || seq.next_token < 0) continue;
    batch_tokens_.push_back(seq.next_token);
    batch_parts_.push_back({.cache = seq.cache, .count = 1, .logits = true, .prompt = false});
    batch_seqs_.push_back(i);
  }
  const bool decoding = !batch_parts_.empty();
  int64_t budget = opts_.prefill_chunk, prompt_tokens = 0;
  for (size_t i = 0; i < active_.size() && budget > 0; ++i) {
    Sequence& seq = *active_[i];
    const int64_t prompt_len = int64_t(seq.req.prompt.size());
    if (seq.prefilled >= prompt_len) continue;
    const int64_t n = std::min(budget, prompt_len - seq.prefilled);
    const int32_t* chunk = seq.req.prompt.data() + seq.prefilled;
    batch_tokens_.insert(batch_tokens_.end(), chunk, chunk + n);
    batch_parts_.push_back({.cache = seq.cache,
                            .count = n,
                            .logits = seq.prefilled + n == prompt_len,
                            .prompt = true});
    batch_seqs_.push_back(i);
    budget -= n;
    prompt_tokens += n;
  }
  if (!batch_parts_.empty()) RunStep(decoding, prompt_tokens);
  UpdateGauges();
}

void Scheduler::RunStep(bool decoding, int64_t prompt_tokens) {
  const auto t0 = Clock::now();
  std::string error;
  std::exception_ptr exception;
  try {
    engine_.Step(batch_tokens_, batch_parts_, logits_.data());
  } catch (const std::exception& e) {
    error = e.what();
    exception = std::current_exception();
  }
  {
    // Steps that decode count as decode steps (with any prompt chunk batched into them).
    std::lock_guard lk(mu_);
    const double secs = SecondsBetween(t0, Clock::now());
    if (decoding) {
      stats_.decode_seconds_total += secs;
      ++stats_.decode_steps_total;
    } else {
      stats_.prefill_seconds_total += secs;
    }
    if (error.empty()) stats_.prefill_tokens_total += prompt_tokens;
  }
  const size_t parts = batch_parts_.size();
  if (!error.empty()) {
    // The caches may hold part of the step: forget them.
    for (size_t b = 0; b < parts; ++b) {
      Sequence& seq = *active_[batch_seqs_[b]];
      caches_[size_t(seq.cache)].tokens.clear();
      try {
        engine_.Truncate(seq.cache, 0);
      } catch (...) {
      }
      batch_alive_[b] = 0;
      seq.reason = FinishReason::kError;
      seq.error = error;
      seq.exception = exception;
    }
  } else {
    batch_rows_.clear();  // part of each logits row
    size_t begin = 0;
    for (size_t b = 0; b < parts; ++b) {
      const Engine::Part& part = batch_parts_[b];
      Sequence& seq = *active_[batch_seqs_[b]];
      std::vector<int32_t>& held = caches_[size_t(seq.cache)].tokens;
      held.insert(held.end(), batch_tokens_.begin() + std::ptrdiff_t(begin),
                  batch_tokens_.begin() + std::ptrdiff_t(begin + size_t(part.count)));
      begin += size_t(part.count);
      if (part.prompt) {
        seq.prefilled += part.count;
      } else {
        seq.next_token = -1;
        ++seq.stats.decode_steps;
      }
      batch_alive_[b] = 1;
      if (part.logits) batch_rows_.push_back(b);
    }
    // Sequences sample independently (a 128k-vocabulary top-p sort is milliseconds): spread
    // them over the compute threads, which are idle between engine calls.
    ThreadPool::Global().Run(int64_t(batch_rows_.size()), [&](int64_t r, int) {
      const size_t b = batch_rows_[size_t(r)];
      batch_alive_[b] = SampleAndEmit(*active_[batch_seqs_[b]],
                                      logits_.data() + size_t(r) * size_t(vocab_), size_t(r));
    });
  }
  // Remove finished sequences from the back so earlier indices stay valid.
  dead_.clear();
  for (size_t b = 0; b < parts; ++b)
    if (!batch_alive_[b]) dead_.push_back(batch_seqs_[b]);
  std::sort(dead_.rbegin(), dead_.rend());
  for (size_t i : dead_) Finish(i, active_[i]->reason, active_[i]->error, active_[i]->exception);
}

void Scheduler::Admit(Pending p) {
  auto seq = std::make_unique<Sequence>();
  seq->req = std::move(p.req);
  seq->submitted = p.submitted;
  const int64_t prompt_len = int64_t(seq->req.prompt.size());
  seq->stats.prompt_tokens = prompt_len;
  seq->stats.queue_seconds = SecondsBetween(p.submitted, Clock::now());
  std::string bad;
  if (prompt_len < 1) {
    bad = "the prompt is empty";
  } else if (prompt_len >= context_) {
    bad = fmt::format("the prompt has {} tokens; the context holds {}", prompt_len, context_);
  } else {
    for (int32_t t : seq->req.prompt) {
      if (t < 0 || t >= vocab_) {
        bad = fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, vocab_);
        break;
      }
    }
  }
  if (bad.empty() && !seq->req.sampler) bad = "no sampler";
  if (!bad.empty()) {
    {
      std::lock_guard lk(mu_);
      ++stats_.finished_error;
    }
    seq->req.sink->OnFinish(FinishReason::kError, seq->stats, bad);
    return;
  }
  const int64_t room = context_ - prompt_len;
  seq->req.max_tokens = seq->req.max_tokens <= 0 ? room : std::min(seq->req.max_tokens, room);

  // The free cache sharing the longest prefix with the prompt (at least one prompt token is
  // always recomputed: its logits start the generation); ties -> least recently used.
  int best = -1;
  int64_t best_common = -1;
  for (int c = 0; c < int(caches_.size()); ++c) {
    const CacheSlot& slot = caches_[size_t(c)];
    if (slot.busy) continue;
    const size_t lim = std::min(slot.tokens.size(), size_t(prompt_len - 1));
    const auto mm =
        std::mismatch(slot.tokens.begin(), slot.tokens.begin() + lim, seq->req.prompt.begin());
    // Models with sliding-window layers can reuse a prefix only while its window is held.
    const int64_t common = engine_.ReusablePrefix(c, int64_t(mm.first - slot.tokens.begin()));
    if (common > best_common ||
        (common == best_common && slot.last_used < caches_[size_t(best)].last_used)) {
      best = c;
      best_common = common;
    }
  }
  TQ_CHECK(best >= 0, "scheduler", "no free KV cache (parallel exceeds the caches)");
  CacheSlot& slot = caches_[size_t(best)];
  if (int64_t(slot.tokens.size()) > best_common) {
    slot.tokens.resize(size_t(best_common));
    try {
      engine_.Truncate(best, best_common);
    } catch (const std::exception& e) {
      slot.tokens.clear();
      try {
        engine_.Truncate(best, 0);
      } catch (...) {
      }
      {
        std::lock_guard lk(mu_);
        ++stats_.finished_error;
      }
      seq->req.sink->OnFinish(FinishReason::kError, seq->stats, e.what());
      return;
    }
  }
  slot.busy = true;
  slot.last_used = ++use_clock_;
  seq->cache = best;
  seq->prefilled = best_common;
  seq->stats.cached_tokens = best_common;
  {
    std::lock_guard lk(mu_);
    ++stats_.sequences_total;
    stats_.prompt_tokens_total += prompt_len;
    stats_.cached_tokens_total += best_common;
  }
  active_.push_back(std::move(seq));
}

bool Scheduler::SampleAndEmit(Sequence& seq, float* logits, size_t scratch) {
  float* lp_tmp = logprob_tmp_.data() + scratch * size_t(vocab_);
  int32_t* index_tmp = index_tmp_.data() + scratch * size_t(vocab_);
  auto done = [&](FinishReason r, std::string error = "") {
    seq.reason = r;
    seq.error = std::move(error);
    if (r == FinishReason::kError)
      seq.exception = std::current_exception();  // null outside a catch
    return false;
  };
  TokenLogprobs lp;
  const bool want_lp = seq.req.top_logprobs >= 0;
  // Logprobs describe the model's distribution, before the sampler reshapes it: copy first.
  if (want_lp) std::copy(logits, logits + vocab_, lp_tmp);
  int32_t tok;
  try {
    tok = seq.req.sampler->Sample(std::span<float>(logits, size_t(vocab_)));
  } catch (const std::exception& e) {
    return done(FinishReason::kError, e.what());
  }
  if (tok < 0 || tok >= vocab_) {
    return done(FinishReason::kError,
                fmt::format("sampled token {} is outside the vocabulary", tok));
  }
  if (seq.generated == 0) {
    seq.stats.ttft_seconds = SecondsBetween(seq.submitted, Clock::now());
    std::lock_guard lk(mu_);
    stats_.ttft_seconds_sum += seq.stats.ttft_seconds;
    stats_.queue_seconds_sum += seq.stats.queue_seconds;
    ++stats_.ttft_count;
  }
  if (std::find(seq.req.eos_tokens.begin(), seq.req.eos_tokens.end(), tok) !=
      seq.req.eos_tokens.end()) {
    return done(FinishReason::kEos);
  }
  if (want_lp) {
    ComputeLogprobs(lp_tmp, vocab_, seq.req.top_logprobs, tok, lp_tmp, index_tmp, lp);
  }
  ++seq.generated;
  seq.stats.completion_tokens = seq.generated;
  {
    std::lock_guard lk(mu_);
    ++stats_.generated_tokens_total;
  }
  bool more;
  try {
    more = seq.req.sink->OnToken(tok, want_lp ? &lp : nullptr);
  } catch (const std::exception& e) {
    return done(FinishReason::kError, e.what());
  }
  if (!more)
    return done(seq.req.sink->Cancelled() ? FinishReason::kCancelled : FinishReason::kStop);
  if (seq.generated >= seq.req.max_tokens) return done(FinishReason::kLength);
  seq.next_token = tok;
  return true;
}

void Scheduler::Finish(size_t index, FinishReason reason, const std::string& error,
                       std::exception_ptr exception) {
  std::unique_ptr<Sequence> seq = std::move(active_[index]);
  active_.erase(active_.begin() + std::ptrdiff_t(index));
  CacheSlot& slot = caches_[size_t(seq->cache)];
  slot.busy = false;
  slot.last_used = ++use_clock_;
  seq->stats.completion_tokens = seq->generated;
  seq->stats.total_seconds = SecondsBetween(seq->submitted, Clock::now());
  std::string why = error;
  if (reason == FinishReason::kError && why.empty()) why = "generation failed";
  {
    // Counted before the sink hears of it: whoever sees the response sees it in the stats.
    std::lock_guard lk(mu_);
    switch (reason) {
      case FinishReason::kNone:  // not a reason to finish; counted as the error it would be
      case FinishReason::kError:
        ++stats_.finished_error;
        break;
      case FinishReason::kEos:
      case FinishReason::kStop:
        ++stats_.finished_stop;
        break;
      case FinishReason::kLength:
        ++stats_.finished_length;
        break;
      case FinishReason::kCancelled:
        ++stats_.finished_cancelled;
        break;
    }
    stats_.active = int(active_.size());
  }
  try {
    if (reason == FinishReason::kError && exception) seq->req.sink->OnException(exception);
    seq->req.sink->OnFinish(reason, seq->stats, why);
  } catch (...) {
  }
}

void Scheduler::UpdateGauges() {
  int64_t active_tokens = 0, total_tokens = 0;
  for (const auto& s : active_) active_tokens += int64_t(caches_[size_t(s->cache)].tokens.size());
  for (const auto& c : caches_) total_tokens += int64_t(c.tokens.size());
  const int64_t kv_bytes = engine_.kv_bytes_held();
  const auto now = Clock::now();
  std::lock_guard lk(mu_);
  stats_.kv_bytes = kv_bytes;
  stats_.active = int(active_.size());
  stats_.queued = int(queue_.size());
  stats_.kv_tokens_active = active_tokens;
  stats_.kv_tokens_total = total_tokens;
  rate_window_.emplace_back(now, stats_.generated_tokens_total);
  while (rate_window_.size() > 1 &&
         SecondsBetween(rate_window_.front().first, now) > kRateWindowSeconds) {
    rate_window_.pop_front();
  }
}

}  // namespace tq
