// Prefix reuse on a model whose layers all have a sliding window (tq-llama-21m relabelled as
// mistral, window 32) and caches that keep only the window (kv_cache.h): a prefix whose window
// was dropped is recomputed from 0, a prefix still inside it is reused, and both give what a fresh
// cache gives.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "fake_engine.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "recording_sink.h"
#include "runtime/model_engine.h"
#include "runtime/scheduler.h"
#include "server/model_text_model.h"
#include "testutil/testutil.h"

namespace tq::server {
namespace {

namespace fs = std::filesystem;

using Sink = test::RecordingSink;

std::shared_ptr<Sink> Submit(Scheduler& sched, const std::vector<int32_t>& prompt, int64_t n) {
  SequenceRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampler = std::make_unique<test::GreedySampler>();
  auto sink = std::make_shared<Sink>();
  r.sink = sink;
  std::vector<SequenceRequest> v;
  v.push_back(std::move(r));
  EXPECT_TRUE(sched.Submit(std::move(v)));
  sink->Wait();
  EXPECT_EQ(sink->reason, FinishReason::kLength) << sink->error;
  return sink;
}

std::vector<int32_t> Prompt(int len) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back(int32_t(100 + (i * 37) % 900));
  return p;
}

TEST(SlidingWindowReuse, DroppedWindowsAreRecomputedKeptOnesReused) {
  tq::test::TempDir tmp;
  const std::string src = tq::test::ModelDir("tq-llama-21m");
  const std::string dir = tmp.file("mistral");
  fs::create_directory(dir);
  auto cfg = nlohmann::json::parse(ReadFileToString(src + "/config.json"));
  cfg["model_type"] = "mistral";
  cfg["architectures"] = {"MistralForCausalLM"};
  cfg["sliding_window"] = 32;
  tq::test::WriteFile(dir + "/config.json", cfg.dump());
  fs::create_symlink(src + "/model.safetensors", dir + "/model.safetensors");
  auto model = Model::Load(dir);
  // 32 + 16 slots per layer: a 100-token prompt slides them several times.
  const KvCacheOptions opts{.max_tokens = 256, .dtype = KvDType::kF32, .max_append = 16};
  auto fresh = [&](const std::vector<int32_t>& prompt) {
    ModelEngine engine(*model, 1, opts);
    Scheduler sched(engine, {.parallel = 1, .max_queue = 4, .prefill_chunk = 16});
    return Submit(sched, prompt, 6)->tokens;
  };

  ModelEngine engine(*model, 1, opts);
  Scheduler sched(engine, {.parallel = 1, .max_queue = 4, .prefill_chunk = 16});
  const std::vector<int32_t> turn1 = Prompt(100);
  const auto s1 = Submit(sched, turn1, 6);
  EXPECT_EQ(s1->tokens, fresh(turn1));
  // Turn 2 continues turn 1 (+ its 5 answer tokens fed back): reused, the window is held.
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), s1->tokens.begin(), s1->tokens.end());
  for (int i = 0; i < 9; ++i) turn2.push_back(int32_t(300 + i));
  const auto s2 = Submit(sched, turn2, 6);
  EXPECT_EQ(s2->stats.cached_tokens, 105);
  EXPECT_EQ(s2->tokens, fresh(turn2));
  // A branch at 40: positions before 40 - 31 are gone, so nothing is reused (and no error).
  std::vector<int32_t> branch(turn1.begin(), turn1.begin() + 40);
  branch.push_back(7);
  const auto s3 = Submit(sched, branch, 6);
  EXPECT_EQ(s3->stats.cached_tokens, 0);
  EXPECT_EQ(s3->tokens, fresh(branch));
  // The branch's 46 tokens fit in the slots without sliding: turn 1 again reuses its 40.
  const auto s4 = Submit(sched, turn1, 6);
  EXPECT_EQ(s4->stats.cached_tokens, 40);
  EXPECT_EQ(s4->tokens, s1->tokens);
  // Now 105 held, slid: reusable only from the truncation floor on.
  EXPECT_EQ(engine.ReusablePrefix(0, 104), 104);
  EXPECT_EQ(engine.ReusablePrefix(0, 5), 0);
  EXPECT_EQ(engine.ReusablePrefix(0, 0), 0);
}

}  // namespace
}  // namespace tq::server
