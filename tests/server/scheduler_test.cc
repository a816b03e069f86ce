#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "fake_engine.h"
#include "recording_sink.h"

namespace tq::server {
namespace {

using test::FakeEngine;
using test::GreedySampler;
using test::RecordingSink;

SequenceRequest Req(std::vector<int32_t> prompt, int64_t max_tokens,
                    std::shared_ptr<RecordingSink> sink) {
  SequenceRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampler = std::make_unique<GreedySampler>();
  r.sink = std::move(sink);
  return r;
}

std::vector<SequenceRequest> One(SequenceRequest r) {
  std::vector<SequenceRequest> v;
  v.push_back(std::move(r));
  return v;
}

TEST(Scheduler, GeneratesUntilMaxTokens) {
  FakeEngine engine(100, 64, 2);
  Scheduler sched(engine, {.parallel = 2, .max_queue = 4, .prefill_chunk = 3});
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 3, 4, 5, 6, 7}, 5, sink))));
  sink->Wait();
  EXPECT_EQ(sink->reason, FinishReason::kLength);
  EXPECT_EQ(sink->tokens, (std::vector<int32_t>{8, 9, 10, 11, 12}));
  EXPECT_EQ(sink->stats.prompt_tokens, 7);
  EXPECT_EQ(sink->stats.completion_tokens, 5);
  EXPECT_EQ(engine.prefilled_tokens, 7);
  EXPECT_EQ(engine.prefill_calls, 3);  // chunks of 3, 3, 1
  EXPECT_EQ(sink->finish_calls, 1);
}

TEST(Scheduler, StopsOnEosAndOnSinkStop) {
  FakeEngine engine(100, 64, 2);
  Scheduler sched(engine, {.parallel = 2, .max_queue = 4});
  auto a = std::make_shared<RecordingSink>();
  auto r = Req({10}, 50, a);
  r.eos_tokens = {13};
  auto b = std::make_shared<RecordingSink>();
  b->stop_at = 22;
  std::vector<SequenceRequest> v;
  v.push_back(std::move(r));
  v.push_back(Req({20}, 50, b));
  ASSERT_TRUE(sched.Submit(std::move(v)));
  a->Wait();
  b->Wait();
  EXPECT_EQ(a->reason, FinishReason::kEos);              // OpenAI's "stop" (openai_format.cc)
  EXPECT_EQ(a->tokens, (std::vector<int32_t>{11, 12}));  // EOS itself is not emitted
  EXPECT_EQ(b->reason, FinishReason::kStop);
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{21, 22}));
}

// Without its own thread (the Generator's mode) the scheduler runs on the caller's thread until
// idle, stops and cancels the same way, and hands an engine failure's exception to the sink.
TEST(Scheduler, RunsOnTheCallersThreadWithoutOwnThread) {
  FakeEngine engine(100, 64, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 1, .prefill_chunk = 2, .own_thread = false});
  auto a = std::make_shared<RecordingSink>();
  auto r = Req({1, 2, 3}, 10, a);
  r.eos_tokens = {6};
  ASSERT_TRUE(sched.Submit(One(std::move(r))));
  auto b = std::make_shared<RecordingSink>();
  EXPECT_FALSE(sched.Submit(One(Req({1}, 4, b))));  // max_queue 1: the queue is full
  sched.RunUntilIdle();
  EXPECT_EQ(a->finish_calls, 1);
  EXPECT_EQ(a->finish_thread, std::this_thread::get_id());
  EXPECT_EQ(a->reason, FinishReason::kEos);
  EXPECT_EQ(a->tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(a->stats.decode_steps, 2);  // 4 and 5 fed back; the eos id is not
  EXPECT_EQ(b->finish_calls, 0);

  auto c = std::make_shared<RecordingSink>();
  c->cancel_after = 2;  // the sink's OnToken returns true; the next step drops it
  ASSERT_TRUE(sched.Submit(One(Req({10}, 20, c))));
  sched.RunUntilIdle();
  EXPECT_EQ(c->reason, FinishReason::kCancelled);

  auto d = std::make_shared<RecordingSink>();
  engine.fail_decode = true;
  ASSERT_TRUE(sched.Submit(One(Req({30, 31}, 5, d))));
  sched.RunUntilIdle();
  EXPECT_EQ(d->reason, FinishReason::kError);
  ASSERT_TRUE(d->exception);
  EXPECT_THROW(std::rethrow_exception(d->exception), std::runtime_error);
  EXPECT_NE(d->error.find("fake: decode failed"), std::string::npos) << d->error;
}

TEST(Scheduler, ClampsToContext) {
  FakeEngine engine(100, 8, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 3, 4, 5}, 0, sink))));
  sink->Wait();
  EXPECT_EQ(sink->reason, FinishReason::kLength);
  EXPECT_EQ(sink->tokens.size(), 3u);  // 5 + 3 = context
}

TEST(Scheduler, RejectsBadPrompts) {
  FakeEngine engine(100, 8, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  auto too_long = std::make_shared<RecordingSink>();
  auto empty = std::make_shared<RecordingSink>();
  auto bad_id = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 3, 4, 5, 6, 7, 8}, 1, too_long))));
  ASSERT_TRUE(sched.Submit(One(Req({}, 1, empty))));
  ASSERT_TRUE(sched.Submit(One(Req({1, 100}, 1, bad_id))));
  too_long->Wait();
  empty->Wait();
  bad_id->Wait();
  EXPECT_EQ(too_long->reason, FinishReason::kError);
  EXPECT_NE(too_long->error.find("context holds 8"), std::string::npos) << too_long->error;
  EXPECT_EQ(empty->reason, FinishReason::kError);
  EXPECT_EQ(bad_id->reason, FinishReason::kError);
  // Still serves good requests afterwards.
  auto ok = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 2, ok))));
  ok->Wait();
  EXPECT_EQ(ok->tokens, (std::vector<int32_t>{2, 3}));
}

TEST(Scheduler, BatchesConcurrentSequences) {
  FakeEngine engine(1000, 256, 4);
  engine.decode_delay_us = 200;
  Scheduler sched(engine, {.parallel = 4, .max_queue = 16});
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    reqs.push_back(Req({int32_t(100 * i + 1)}, 30, sinks.back()));
  }
  ASSERT_TRUE(sched.Submit(std::move(reqs)));
  for (int i = 0; i < 4; ++i) {
    sinks[i]->Wait();
    ASSERT_EQ(sinks[i]->tokens.size(), 30u);
    EXPECT_EQ(sinks[i]->tokens[0], 100 * i + 2);
    EXPECT_EQ(sinks[i]->tokens[29], 100 * i + 31);
  }
  EXPECT_EQ(engine.max_batch, 4) << engine.Log();
  // 4 x 29 decoded tokens in about 29 steps, not 116.
  EXPECT_LE(engine.decode_calls, 29 + 4);
  const SchedulerStats st = sched.Stats();
  EXPECT_EQ(st.generated_tokens_total, 120);
  EXPECT_EQ(st.finished_length, 4);
}

TEST(Scheduler, LongPrefillIsChunkedBetweenDecodeSteps) {
  FakeEngine engine(1000, 1024, 2);
  engine.decode_delay_us = 1000;
  Scheduler sched(engine, {.parallel = 2, .max_queue = 4, .prefill_chunk = 8});
  auto running = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 200, running))));
  while (sched.Stats().generated_tokens_total < 3) std::this_thread::yield();
  auto late = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(std::vector<int32_t>(80, 7), 2, late))));
  late->Wait();
  running->Wait();
  // The 80-token prompt went in 10 chunks, each followed by a decode step of the other.
  const std::string log = engine.Log();
  const size_t first = log.find('P', 1);  // skip the first sequence's own prefill
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(log.find("PDPDPDPDPDPDPDPDPDPD", first), std::string::npos) << log;
  EXPECT_EQ(late->stats.prompt_tokens, 80);
  EXPECT_EQ(running->tokens.size(), 200u);
}

TEST(Scheduler, PromptsArrivingTogetherArePrefilledInOneStep) {
  FakeEngine engine(1000, 256, 4);
  Scheduler sched(engine, {.parallel = 4, .max_queue = 8, .prefill_chunk = 64});
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    reqs.push_back(Req(std::vector<int32_t>(size_t(5 + i), int32_t(100 * i + 1)), 3, sinks.back()));
  }
  ASSERT_TRUE(sched.Submit(std::move(reqs)));
  for (int i = 0; i < 4; ++i) {
    sinks[size_t(i)]->Wait();
    EXPECT_EQ(sinks[size_t(i)]->tokens,
              (std::vector<int32_t>{100 * i + 2, 100 * i + 3, 100 * i + 4}));
    EXPECT_EQ(sinks[size_t(i)]->stats.prompt_tokens, 5 + i);
  }
  // One step prefilled all four prompts (5 + 6 + 7 + 8 tokens); two decode steps followed.
  EXPECT_EQ(engine.max_prompt_parts, 4);
  EXPECT_EQ(engine.step_calls, 3);
  EXPECT_EQ(engine.prefilled_tokens, 26);
  EXPECT_EQ(sched.Stats().prefill_tokens_total, 26);
}

TEST(Scheduler, PromptChunksRideAlongWithDecodeSteps) {
  FakeEngine engine(1000, 1024, 2);
  engine.decode_delay_us = 1000;
  Scheduler sched(engine, {.parallel = 2, .max_queue = 4, .prefill_chunk = 16});
  auto running = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 100, running))));
  while (sched.Stats().generated_tokens_total < 3) std::this_thread::yield();
  auto late = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(std::vector<int32_t>(40, 7), 2, late))));
  late->Wait();
  running->Wait();
  // 40 prompt tokens in chunks of 16, 16, 8, each in a step that also decodes the other.
  EXPECT_GE(engine.mixed_steps, 3);
  EXPECT_EQ(late->tokens, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(running->tokens.size(), 100u);
}

TEST(Scheduler, QueueBoundAndLateJoiners) {
  FakeEngine engine(1000, 256, 1);
  engine.decode_delay_us = 500;
  Scheduler sched(engine, {.parallel = 1, .max_queue = 2});
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  auto c = std::make_shared<RecordingSink>();
  auto d = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 20, a))));
  // Whether `a` is already running or not, the queue holds 2 at most.
  bool b_ok = sched.Submit(One(Req({2}, 20, b)));
  bool c_ok = sched.Submit(One(Req({3}, 20, c)));
  bool d_ok = sched.Submit(One(Req({4}, 20, d)));
  EXPECT_TRUE(b_ok);
  EXPECT_FALSE(b_ok && c_ok && d_ok);
  a->Wait();
  b->Wait();
  EXPECT_EQ(a->tokens.size(), 20u);
  EXPECT_EQ(b->tokens.size(), 20u);
  if (c_ok) c->Wait();
  if (d_ok) d->Wait();
  EXPECT_GE(sched.Stats().rejected_total, 1);
}

TEST(Scheduler, CancelledSequenceFreesItsSlot) {
  FakeEngine engine(1000, 1024, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  auto gone = std::make_shared<RecordingSink>();
  gone->cancel_after = 3;
  auto next = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 900, gone))));
  ASSERT_TRUE(sched.Submit(One(Req({500}, 5, next))));
  gone->Wait();
  next->Wait();
  EXPECT_EQ(gone->reason, FinishReason::kCancelled);
  EXPECT_LE(gone->tokens.size(), 4u);  // dropped at the next step
  EXPECT_EQ(next->reason, FinishReason::kLength);
  EXPECT_EQ(next->tokens.size(), 5u);
}

TEST(Scheduler, ReusesTheLongestCachedPrefix) {
  FakeEngine engine(1000, 1024, 3);  // parallel 1 + 2 kept caches
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  std::vector<int32_t> turn1(100);
  for (int i = 0; i < 100; ++i) turn1[size_t(i)] = 500 + i;
  auto s1 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(turn1, 4, s1))));
  s1->Wait();
  EXPECT_EQ(engine.prefilled_tokens, 100);
  EXPECT_EQ(s1->stats.cached_tokens, 0);

  // An unrelated prompt goes to another (empty) cache and keeps turn 1's.
  auto other = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({7, 8, 9}, 2, other))));
  other->Wait();
  EXPECT_EQ(engine.prefilled_tokens, 103);

  // Turn 2 = turn 1 + its answer + 10 new tokens: only the new ones (and nothing of turn 1)
  // are prefilled. The cache holds turn1 + the 3 answer tokens fed back (the 4th was never fed).
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), s1->tokens.begin(), s1->tokens.end());
  for (int i = 0; i < 10; ++i) turn2.push_back(20 + i);
  auto s2 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(turn2, 2, s2))));
  s2->Wait();
  EXPECT_EQ(s2->stats.cached_tokens, 103);
  EXPECT_EQ(engine.prefilled_tokens, 103 + 11);
  EXPECT_EQ(s2->tokens, (std::vector<int32_t>{30, 31}));
  EXPECT_EQ(sched.Stats().cached_tokens_total, 103);

  // A prompt that diverges inside a cached one truncates it to the common prefix.
  std::vector<int32_t> branch(turn1.begin(), turn1.begin() + 50);
  branch.push_back(1);
  auto s3 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(branch, 1, s3))));
  s3->Wait();
  EXPECT_EQ(s3->stats.cached_tokens, 50);
  EXPECT_EQ(s3->tokens, (std::vector<int32_t>{2}));
}

TEST(Scheduler, SlidingWindowCachesReusePrefixesOnlyWhileTheirWindowIsHeld) {
  FakeEngine engine(1000, 1024, 1);
  engine.window = 20;  // the cache keeps its last 20 positions
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  std::vector<int32_t> turn1(100);
  for (int i = 0; i < 100; ++i) turn1[size_t(i)] = 500 + i;
  auto s1 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(turn1, 4, s1))));
  s1->Wait();  // the cache holds 103 tokens: reusable from 83 on
  // Diverging at 50: positions 30..49 are gone, so nothing is reused (not an error).
  std::vector<int32_t> branch(turn1.begin(), turn1.begin() + 50);
  branch.push_back(1);
  auto s2 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(branch, 1, s2))));
  s2->Wait();
  EXPECT_EQ(s2->reason, FinishReason::kLength) << s2->error;
  EXPECT_EQ(s2->stats.cached_tokens, 0);
  EXPECT_EQ(s2->tokens, (std::vector<int32_t>{2}));
  EXPECT_EQ(engine.CacheTokens(0).size(), 51u);
  // Diverging at 45 of the 51 held: within the window, reused.
  std::vector<int32_t> near(branch.begin(), branch.begin() + 45);
  near.push_back(7);
  auto s3 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req(near, 1, s3))));
  s3->Wait();
  EXPECT_EQ(s3->stats.cached_tokens, 45);
  EXPECT_EQ(s3->tokens, (std::vector<int32_t>{8}));
}

TEST(Scheduler, IdenticalPromptStillComputesLastToken) {
  FakeEngine engine(1000, 1024, 2);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  auto a = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 3, 4}, 1, a))));
  a->Wait();
  auto b = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 3, 4}, 1, b))));
  b->Wait();
  EXPECT_EQ(b->stats.cached_tokens, 3);
  EXPECT_EQ(b->tokens, a->tokens);
}

TEST(Scheduler, LogprobsOfTheModelDistribution) {
  FakeEngine engine(10, 64, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  auto sink = std::make_shared<RecordingSink>();
  auto r = Req({1}, 2, sink);
  r.top_logprobs = 3;
  ASSERT_TRUE(sched.Submit(One(std::move(r))));
  sink->Wait();
  ASSERT_EQ(sink->logprobs.size(), 2u);
  const TokenLogprobs& lp = sink->logprobs[0];
  // One-hot 10 over 10 logits: p = e^10 / (e^10 + 9).
  const double want = 10.0 - std::log(std::exp(10.0) + 9.0);
  EXPECT_NEAR(lp.logprob, want, 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 2);
  EXPECT_NEAR(lp.top[0].second, want, 1e-5);
  EXPECT_NEAR(lp.top[1].second, -std::log(std::exp(10.0) + 9.0), 1e-5);
}

TEST(Scheduler, EngineFailureFinishesWithErrorAndRecovers) {
  FakeEngine engine(100, 64, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  engine.fail_decode = true;
  auto a = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 5, a))));
  a->Wait();
  EXPECT_EQ(a->reason, FinishReason::kError);
  EXPECT_NE(a->error.find("decode failed"), std::string::npos);
  engine.fail_decode = false;
  auto b = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1}, 3, b))));
  b->Wait();
  EXPECT_EQ(b->reason, FinishReason::kLength);
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{2, 3, 4}));
}

TEST(Scheduler, TruncateFailureFailsOnlyThatRequest) {
  FakeEngine engine(100, 64, 1);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
  auto a = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 3, 4}, 2, a))));
  a->Wait();
  engine.fail_truncate = true;
  auto b = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 9}, 2, b))));  // shares 2 tokens: truncates
  b->Wait();
  EXPECT_EQ(b->reason, FinishReason::kError);
  engine.fail_truncate = false;
  auto c = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched.Submit(One(Req({1, 2, 9}, 2, c))));
  c->Wait();
  EXPECT_EQ(c->reason, FinishReason::kLength);
  EXPECT_EQ(c->stats.cached_tokens, 0);  // the failed cache was emptied
  EXPECT_EQ(c->tokens, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(engine.CacheTokens(0), (std::vector<int32_t>{1, 2, 9, 10}));
}

TEST(Scheduler, StopCancelsEverything) {
  FakeEngine engine(1000, 100000, 1);
  engine.decode_delay_us = 1000;
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  {
    Scheduler sched(engine, {.parallel = 1, .max_queue = 4});
    ASSERT_TRUE(sched.Submit(One(Req({1}, 50000, a))));
    ASSERT_TRUE(sched.Submit(One(Req({1}, 50000, b))));
  }
  EXPECT_EQ(a->finish_calls, 1);
  EXPECT_EQ(b->finish_calls, 1);
  EXPECT_EQ(b->reason, FinishReason::kCancelled);
}

}  // namespace
}  // namespace tq::server
