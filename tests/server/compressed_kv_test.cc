// The scheduler on a real model (tq-llama-21m) with TurboQuant-compressed KV caches: batched
// decode and prompt-prefix reuse must give what one sequence alone on a fresh cache gives.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "fake_engine.h"
#include "kernels/kv_ops.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "recording_sink.h"
#include "runtime/model_engine.h"
#include "runtime/scheduler.h"
#include "server/model_text_model.h"
#include "testutil/testutil.h"

namespace tq::server {
namespace {

using Sink = test::RecordingSink;

std::vector<SequenceRequest> Reqs(const std::vector<std::vector<int32_t>>& prompts, int64_t n,
                                  std::vector<std::shared_ptr<Sink>>* sinks) {
  std::vector<SequenceRequest> v;
  for (const auto& p : prompts) {
    SequenceRequest r;
    r.prompt = p;
    r.max_tokens = n;
    r.sampler = std::make_unique<test::GreedySampler>();
    sinks->push_back(std::make_shared<Sink>());
    r.sink = sinks->back();
    v.push_back(std::move(r));
  }
  return v;
}

// Greedy completions of `prompts` (submitted together: one decode batch) by a scheduler with
// `parallel` slots over caches of `opts`.
std::vector<std::shared_ptr<Sink>> Generate(Model& model, const KvCacheOptions& opts, int parallel,
                                            const std::vector<std::vector<int32_t>>& prompts,
                                            int64_t n) {
  ModelEngine engine(model, parallel + 1, opts);
  Scheduler sched(engine, {.parallel = parallel, .max_queue = 8, .prefill_chunk = 64});
  std::vector<std::shared_ptr<Sink>> sinks;
  EXPECT_TRUE(sched.Submit(Reqs(prompts, n, &sinks)));
  for (auto& s : sinks) s->Wait();
  return sinks;
}

std::vector<int32_t> Prompt(int seed, int len) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back(int32_t(100 + (seed * 131 + i * 17) % 900));
  return p;
}

class CompressedKvTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::Load(tq::test::ModelDir("tq-llama-21m")).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  // Decode scores whole key blocks in int8 where prefill's diagonal blocks use fp32
  // (kernels/kv_ops.h), so a reused prefix and a fresh prefill agree to ~0.5% of a score, not
  // bit for bit; with the QJL sketch a near-tie in this test's 8th token flips on that. Equality
  // of the stored codes and sketches is what the test is about: fp32 scores for param 2.
  void SetUp() override { kernels::SetKvInt8Scoring(GetParam() != 2); }
  void TearDown() override { kernels::SetKvInt8Scoring(true); }
  // Param 0: K4V4 coded from the first position; 1: K4V3 with fp16 sink and recent window;
  // 2: K4V3 with the QJL key sketch (kv/qjl_sketch.h).
  KvCacheOptions Options() const {
    KvCacheOptions o;
    o.max_tokens = 256;
    o.k_bits = 4;
    o.v_bits = GetParam() == 0 ? 4 : 3;
    if (GetParam() == 1) {
      o.sink = 4;
      o.window = 8;
    }
    o.qjl = GetParam() == 2;
    return o;
  }
  static Model* model_;
};
Model* CompressedKvTest::model_ = nullptr;

TEST_P(CompressedKvTest, BatchedDecodeMatchesEachSequenceAlone) {
  const std::vector<std::vector<int32_t>> prompts = {Prompt(1, 20), Prompt(2, 7), Prompt(3, 33)};
  const auto together = Generate(*model_, Options(), 3, prompts, 12);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto alone = Generate(*model_, Options(), 1, {prompts[i]}, 12);
    EXPECT_EQ(together[i]->reason, FinishReason::kLength) << together[i]->error;
    EXPECT_EQ(together[i]->tokens.size(), 12u);
    EXPECT_EQ(together[i]->tokens, alone[0]->tokens) << "prompt " << i;
  }
}

TEST_P(CompressedKvTest, PrefixReuseOnACompressedCache) {
  KvCacheOptions opts = Options();
  // Value centering takes its mean from the first prefill chunk, so a branch shorter than that
  // chunk would code its values against another mean than a fresh prefill: equal only without it.
  opts.center = 0;
  ModelEngine engine(*model_, 2, opts);
  EXPECT_LT(engine.kv_bytes_per_token(), model_->NewCache({.max_tokens = 8})->BytesPerToken() / 2)
      << "a 4-bit cache is less than half the fp16 one";
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4, .prefill_chunk = 64});
  std::vector<std::shared_ptr<Sink>> s1, s2, s3;
  // Turn 1, then turn 2 = turn 1 + its answer + new tokens: the first turn's KV is reused.
  const std::vector<int32_t> turn1 = Prompt(5, 40);
  ASSERT_TRUE(sched.Submit(Reqs({turn1}, 6, &s1)));
  s1[0]->Wait();
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), s1[0]->tokens.begin(), s1[0]->tokens.end());
  for (int i = 0; i < 9; ++i) turn2.push_back(int32_t(300 + i));
  ASSERT_TRUE(sched.Submit(Reqs({turn2}, 8, &s2)));
  s2[0]->Wait();
  EXPECT_EQ(s2[0]->stats.cached_tokens, 45);  // turn 1 + the 5 answer tokens fed back
  // A branch inside turn 1: the cache is truncated into its coded part.
  std::vector<int32_t> branch(turn1.begin(), turn1.begin() + 25);
  branch.push_back(7);
  ASSERT_TRUE(sched.Submit(Reqs({branch}, 8, &s3)));
  s3[0]->Wait();
  EXPECT_EQ(s3[0]->stats.cached_tokens, 25);

  // The same prompts on fresh caches. Codes depend only on the vector coded, so without a
  // window a reused prefix is exactly what a fresh prefill stores. With a recent window, a
  // truncated cache holds coded positions where a fresh one keeps fp16: close, not equal.
  const auto fresh2 = Generate(*model_, opts, 1, {turn2}, 8);
  const auto fresh3 = Generate(*model_, opts, 1, {branch}, 8);
  ASSERT_EQ(s2[0]->tokens.size(), 8u);
  ASSERT_EQ(s3[0]->tokens.size(), 8u);
  if (opts.window == 0) {
    EXPECT_EQ(s2[0]->tokens, fresh2[0]->tokens);
    EXPECT_EQ(s3[0]->tokens, fresh3[0]->tokens);
  } else {
    EXPECT_EQ(s2[0]->tokens[0], fresh2[0]->tokens[0]);
    EXPECT_EQ(s3[0]->tokens[0], fresh3[0]->tokens[0]);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressedKvTest, ::testing::Values(0, 1, 2));

}  // namespace
}  // namespace tq::server
