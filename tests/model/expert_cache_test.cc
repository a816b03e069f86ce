// MoE expert streaming (model/expert_cache.h) is bit-identical to resident experts: logits
// compared with memcmp for cache sizes from one slot to every expert, for prefill, decode and
// batched decode, on the trained tq-qwen3moe-17m (bf16, real routing), a synthetic MoE written
// here (f32, mlp-only layers between MoE layers) and a TurboQuant 4-bit synth MoE (packed
// experts: codes + scales streamed). Plus the cache's accounting and its errors.
#include "model/expert_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "runtime/synth.h"
#include "synthetic_model.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

std::vector<int32_t> Prompt(int64_t n, int64_t vocab, int32_t salt) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 7919 + salt * 104729 + 13) % vocab));
  return t;
}

// Everything the bit-identity check runs, as one vector of logits: a 20-token prefill (all
// logits), 4 decode steps, then a batched decode of 3 sequences for 3 steps and a ForwardBatch
// mixing a prompt chunk with decodes.
std::vector<float> Transcript(Model& m) {
  const int64_t vocab = m.vocab_size();
  const KvCacheOptions opts{.max_tokens = 64, .dtype = KvDType::kF32};
  std::vector<float> out, buf;
  auto c = m.NewCache(opts);
  const auto prompt = Prompt(20, vocab, 1);
  buf.resize(size_t(20 * vocab));
  m.Forward(prompt, *c, buf.data(), true);
  out.insert(out.end(), buf.begin(), buf.end());
  buf.resize(size_t(vocab));
  for (int i = 0; i < 4; ++i) {
    const int32_t t = int32_t((i * 37 + 11) % vocab);
    m.Forward(std::span(&t, 1), *c, buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
  }
  std::vector<std::unique_ptr<KvCache>> cs;
  std::vector<KvCache*> ptrs;
  for (int s = 0; s < 3; ++s) {
    cs.push_back(m.NewCache(opts));
    ptrs.push_back(cs.back().get());
    const auto p = Prompt(3 + 4 * s, vocab, s + 2);
    m.Forward(p, *cs.back(), buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
  }
  buf.resize(size_t(3 * vocab));
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> next = {int32_t((step * 5 + 1) % vocab), int32_t((step * 7 + 2) % vocab),
                                 int32_t((step * 11 + 3) % vocab)};
    m.DecodeBatch(next, ptrs, buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
  }
  const auto chunk = Prompt(6, vocab, 9);
  std::vector<int32_t> toks = chunk;
  toks.push_back(int32_t(17 % vocab));
  const Model::BatchPart parts[] = {{ptrs[0], 6, true}, {ptrs[1], 1, true}};
  buf.resize(size_t(2 * vocab));
  m.ForwardBatch(toks, parts, buf.data());
  out.insert(out.end(), buf.begin(), buf.end());
  return out;
}

int64_t SlotBytes(const std::string& dir) {
  auto m = Model::Load(dir, {.device = "cpu", .expert_cache_bytes = int64_t(1) << 40});
  return m->expert_cache()->slot_bytes();
}

// Streamed transcripts for 1, 2, 3 slots, half and all experts, LRU and LFU, equal the
// resident one byte for byte.
void ExpectBitIdentical(const std::string& dir) {
  auto resident = Model::Load(dir, {.device = "cpu"});
  ASSERT_EQ(resident->expert_cache(), nullptr);
  const std::vector<float> want = Transcript(*resident);
  const int64_t slot = SlotBytes(dir);
  auto probe = Model::Load(dir, {.device = "cpu", .expert_cache_bytes = int64_t(1) << 40});
  const int64_t experts = probe->expert_cache()->stats().experts;
  probe.reset();
  for (int64_t slots : {int64_t(1), int64_t(2), int64_t(3), experts / 2, experts}) {
    for (const char* policy : {"lru", "lfu"}) {
      SCOPED_TRACE(testing::Message() << dir << ": " << slots << " slots, " << policy);
      auto m = Model::Load(dir, {.device = "cpu",
                                 .expert_cache_bytes = slots * slot + slot / 2,
                                 .expert_cache_policy = policy});
      ASSERT_NE(m->expert_cache(), nullptr);
      EXPECT_EQ(m->expert_cache()->slots(), slots);
      const std::vector<float> got = Transcript(*m);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      const ExpertCacheStats s = m->expert_cache()->stats();
      EXPECT_EQ(s.hits + s.misses, s.lookups);
      EXPECT_GT(s.misses, 0);
      EXPECT_GE(s.bytes_read, s.misses * 1);
      if (slots == experts) {
        // Every expert fits: each is read at most once (by a miss or a prefetch).
        EXPECT_LE(s.misses + s.prefetches, experts);
        EXPECT_GT(s.hit_rate(), 0.5);
      }
      if (slots == 1) {
        EXPECT_EQ(s.prefetches, 0);  // no room to prefetch beside the one in use
      } else {
        EXPECT_GT(s.predicted, 0);  // the next-layer prediction ran
        EXPECT_LE(s.predicted_used, s.predicted);
      }
      if (slots >= 3) {
        EXPECT_GT(s.prefetches, 0);
      }
      EXPECT_LT(m->ResidentWeightBytes(), m->WeightBytes());
    }
  }
}

TEST(ExpertCache, TrainedQwen3MoeIsBitIdentical) {
  ExpectBitIdentical(test::ModelDir("tq-qwen3moe-17m"));
}

TEST(ExpertCache, SyntheticMoeWithDenseLayersIsBitIdentical) {
  test::TempDir tmp;
  test::SynthSpec spec;
  spec.model_type = "qwen3_moe";
  spec.layers = 4;
  spec.experts = 6;
  spec.top_k = 2;
  spec.moe_ffn = 16;
  spec.mlp_only_layers = {1};  // MoE, dense, MoE, MoE: the prediction skips the dense layer
  test::WriteSyntheticModel(spec, tmp.path().string(), 7);
  ExpectBitIdentical(tmp.path().string());
}

TEST(ExpertCache, PackedSynthMoeIsBitIdentical) {
  test::TempDir tmp;
  const std::string dir = (tmp.path() / "m").string();
  SynthOptions o;
  o.like = "tiny-qwen3-moe";
  o.out_dir = dir;
  o.bits = 4;
  o.progress = false;
  WriteSynthCheckpoint(o);
  ExpectBitIdentical(dir);
}

TEST(ExpertCache, ABudgetBelowOneExpertIsAnError) {
  const std::string dir = test::ModelDir("tq-qwen3moe-17m");
  const int64_t slot = SlotBytes(dir);
  try {
    Model::Load(dir, {.device = "cpu", .expert_cache_bytes = slot - 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no expert"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      Model::Load(dir, {.device = "cpu", .expert_cache_bytes = slot, .expert_cache_policy = "mru"}),
      UsageError);
}

TEST(ExpertCache, DenseModelHasNoExpertsToStream) {
  EXPECT_THROW(Model::Load(test::ModelDir("tq-llama-21m"),
                           {.device = "cpu", .expert_cache_bytes = int64_t(1) << 30}),
               Error);
}

TEST(ExpertCache, ParseByteSize) {
  EXPECT_EQ(ParseByteSize("4096", "--x"), 4096);
  EXPECT_EQ(ParseByteSize("4GiB", "--x"), int64_t(4) << 30);
  EXPECT_EQ(ParseByteSize("512MiB", "--x"), int64_t(512) << 20);
  EXPECT_EQ(ParseByteSize("1.5G", "--x"), int64_t(3) << 29);
  EXPECT_EQ(ParseByteSize("300m", "--x"), int64_t(300) << 20);
  EXPECT_EQ(ParseByteSize("8kb", "--x"), 8192);
  for (const char* bad : {"", "x", "4 GiB", "-1G", "4GiBs", "nan", "1e30T"})
    EXPECT_THROW(ParseByteSize(bad, "--x"), UsageError) << bad;
}

}  // namespace
}  // namespace tq
