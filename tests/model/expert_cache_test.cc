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
#include "cuda_emu/cuda_emu.h"
#include "kernels/backend.h"
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
// `brief` (the emulated device, slow): an 8-token prefill, 3 decode steps and 2 steps of 2
// sequences batched.
std::vector<float> Transcript(Model& m, bool brief = false) {
  const int64_t vocab = m.vocab_size();
  const KvCacheOptions opts{.max_tokens = 64, .dtype = KvDType::kF32};
  std::vector<float> out, buf;
  auto c = m.NewCache(opts);
  const int64_t n0 = brief ? 8 : 20, steps = brief ? 3 : 4, seqs = brief ? 2 : 3;
  const auto prompt = Prompt(n0, vocab, 1);
  buf.resize(size_t(n0 * vocab));
  m.Forward(prompt, *c, buf.data(), true);
  out.insert(out.end(), buf.begin(), buf.end());
  buf.resize(size_t(vocab));
  for (int i = 0; i < steps; ++i) {
    const int32_t t = int32_t((i * 37 + 11) % vocab);
    m.Forward(std::span(&t, 1), *c, buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
  }
  std::vector<std::unique_ptr<KvCache>> cs;
  std::vector<KvCache*> ptrs;
  for (int s = 0; s < seqs; ++s) {
    cs.push_back(m.NewCache(opts));
    ptrs.push_back(cs.back().get());
    const auto p = Prompt(3 + 4 * s, vocab, s + 2);
    m.Forward(p, *cs.back(), buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
  }
  buf.resize(size_t(seqs * vocab));
  for (int step = 0; step < (brief ? 2 : 3); ++step) {
    std::vector<int32_t> next = {int32_t((step * 5 + 1) % vocab), int32_t((step * 7 + 2) % vocab),
                                 int32_t((step * 11 + 3) % vocab)};
    next.resize(size_t(seqs));
    m.DecodeBatch(next, ptrs, buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
  }
  if (brief) return out;
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
// resident one byte for byte, on `device` (a device backend: with the experts' pinned host copy
// and asynchronous copies, or, host_copy false, read from the checkpoint at each miss).
void ExpectBitIdentical(const std::string& dir, const std::string& device = "cpu",
                        bool host_copy = true) {
  const bool brief = device == "emu";
  auto resident = Model::Load(dir, {.device = device});
  ASSERT_EQ(resident->expert_cache(), nullptr);
  const std::vector<float> want = Transcript(*resident, brief);
  resident.reset();
  const int64_t slot = SlotBytes(dir);
  auto probe = Model::Load(dir, {.device = "cpu", .expert_cache_bytes = int64_t(1) << 40});
  const int64_t experts = probe->expert_cache()->stats().experts;
  probe.reset();
  const bool async = host_copy && kernels::GetBackend(device).memory_space() != MemorySpace::kHost;
  std::vector<int64_t> sizes = {1, 2, 3, experts / 2, experts};
  std::vector<const char*> policies = {"lru", "lfu"};
  if (brief) {  // the emulator: the sizes that take each path once
    sizes = host_copy ? std::vector<int64_t>{1, 3, experts} : std::vector<int64_t>{3};
    policies = {"lru"};
  }
  for (int64_t slots : sizes) {
    for (const char* policy : policies) {
      SCOPED_TRACE(testing::Message()
                   << dir << " on " << device << ": " << slots << " slots, " << policy);
      auto m = Model::Load(dir, {.device = device,
                                 .expert_cache_bytes = slots * slot + slot / 2,
                                 .expert_cache_policy = policy,
                                 .expert_host_copy = host_copy});
      ASSERT_NE(m->expert_cache(), nullptr);
      EXPECT_EQ(m->expert_cache()->slots(), slots);
      const std::vector<float> got = Transcript(*m, brief);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      const ExpertCacheStats s = m->expert_cache()->stats();
      EXPECT_EQ(s.host_copy_bytes > 0, async);
      EXPECT_EQ(s.hits + s.misses, s.lookups);
      EXPECT_GT(s.misses, 0);
      EXPECT_GE(s.bytes_read, s.misses * 1);
      if (slots == experts) {
        // Every expert fits: each is read at most once (by a miss or a prefetch).
        EXPECT_LE(s.misses + s.prefetches, experts);
        EXPECT_GT(s.hit_rate(), 0.5);
      }
      const bool prefetching =
          kernels::GetBackend(device).memory_space() == MemorySpace::kHost || async;
      if (slots == 1) {
        EXPECT_EQ(s.prefetches, 0);  // no room to prefetch beside the one in use
      } else if (prefetching) {
        EXPECT_GT(s.predicted, 0);  // the next-layer prediction ran
        EXPECT_LE(s.predicted_used, s.predicted);
      }
      if (slots >= 3 && prefetching) {
        EXPECT_GT(s.prefetches, 0);
      }
      EXPECT_LT(m->ResidentWeightBytes(), m->WeightBytes());
    }
  }
}

// A synthetic f32 qwen3_moe (6 experts, top 2) in `dir`, with dense layers at `mlp_only`.
std::string WriteF32Moe(const std::filesystem::path& dir, int layers,
                        std::vector<int64_t> mlp_only) {
  test::SynthSpec spec;
  spec.model_type = "qwen3_moe";
  spec.layers = layers;
  spec.experts = 6;
  spec.top_k = 2;
  spec.moe_ffn = 16;
  spec.mlp_only_layers = std::move(mlp_only);
  std::filesystem::create_directories(dir);
  test::WriteSyntheticModel(spec, dir.string(), 7);
  return dir.string();
}

// `synth --like tiny-qwen3-moe --bits 4` (packed experts) into `dir`.
std::string WritePackedMoe(const std::filesystem::path& dir) {
  SynthOptions o;
  o.like = "tiny-qwen3-moe";
  o.out_dir = dir.string();
  o.bits = 4;
  o.progress = false;
  WriteSynthCheckpoint(o);
  return o.out_dir;
}

TEST(ExpertCache, TrainedQwen3MoeIsBitIdentical) {
  ExpectBitIdentical(test::ModelDir("tq-qwen3moe-17m"));
}

TEST(ExpertCache, SyntheticMoeWithDenseLayersIsBitIdentical) {
  test::TempDir tmp;
  // MoE, dense, MoE, MoE: the prediction skips the dense layer.
  ExpectBitIdentical(WriteF32Moe(tmp.path() / "m", 4, {1}));
}

TEST(ExpertCache, PackedSynthMoeIsBitIdentical) {
  test::TempDir tmp;
  ExpectBitIdentical(WritePackedMoe(tmp.path() / "m"));
}

// The device path (kernels/cuda's CudaBackend, on the host emulator and on a GPU when one is
// present): the same bytes reach the same kernels whether an expert was resident, copied at a
// miss (from the pinned host copy, or read from the checkpoint) or copied ahead on the copy
// queue. The emulator is slow: it runs the packed model only.
void ExpectDeviceBitIdentical(const std::string& device, bool with_f32) {
  test::TempDir tmp;
  const std::string q4 = WritePackedMoe(tmp.path() / "q4");
  for (bool host_copy : {true, false}) ExpectBitIdentical(q4, device, host_copy);
  if (!with_f32) return;
  const std::string f32 = WriteF32Moe(tmp.path() / "f32", 3, {});
  for (bool host_copy : {true, false}) ExpectBitIdentical(f32, device, host_copy);
}

TEST(ExpertCache, EmulatedDeviceCopiesAreBitIdentical) {
  if (!kernels::EmulatedCudaDevice()) GTEST_SKIP() << "the emulator is off under ASan";
  ExpectDeviceBitIdentical("emu", false);
}

TEST(ExpertCache, GpuCopiesAreBitIdentical) {
  if (!kernels::BuiltWithCudaBackend() || kernels::CudaDeviceCount() == 0)
    GTEST_SKIP() << "no GPU (this build " << (kernels::BuiltWithCudaBackend() ? "has" : "lacks")
                 << " the CUDA backend)";
  ExpectDeviceBitIdentical("cuda", true);
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
