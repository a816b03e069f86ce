// synth writes checkpoints that the rest of the engine loads: the tiny test shapes end to end.
#include "runtime/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/model.h"
#include "runtime/bench.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

TEST(Synth, TinyCheckpointsLoadAndRun) {
  for (const char* like : {"tiny-llama", "tiny-qwen3-moe", "tiny-qwen3.5-hybrid"}) {
    test::TempDir tmp;
    SynthOptions o;
    o.like = like;
    o.out_dir = tmp.file("model");
    o.seed = 7;
    o.progress = false;
    const SynthResult r = WriteSynthCheckpoint(o);
    EXPECT_EQ(r.num_shards, 1);
    auto ckpt = Checkpoint::Open(o.out_dir);
    EXPECT_EQ(ckpt->TotalBytes(), r.total_bytes);
    EXPECT_EQ(ckpt->Info("model.embed_tokens.weight").dtype, DType::BF16);
    const ModelConfig cfg = LoadModelConfig(o.out_dir);
    EXPECT_EQ(cfg.vocab_size, 512);

    auto tok = Tokenizer::Load(o.out_dir);
    EXPECT_EQ(tok->vocab_size(), 512);
    const std::string text = "Hello world, 123!";
    const auto ids = tok->Encode(text, false);
    EXPECT_EQ(tok->Decode(ids), text) << like;

    auto model = Model::Load(o.out_dir);
    BenchOptions b;
    b.prompt_tokens = 8;
    b.gen_tokens = 4;
    const BenchResult br = RunBench(*model, b);
    EXPECT_TRUE(br.logits_finite) << like;
    EXPECT_GT(br.decode_tok_s, 0);
    // The model may widen small tensors (norms) when loading: within 1% of the file.
    EXPECT_NEAR(double(br.model_bytes) / double(r.total_bytes), 1.0, 0.01);
    // No temp directory left behind.
    for (const auto& e : fs::directory_iterator(tmp.path())) {
      EXPECT_EQ(e.path().filename(), "model");
    }
  }
}

// --bits with convert's embedding default: the embedding / LM head written as 8-bit codes (not
// bf16), and the packed file loads and runs.
TEST(Synth, PackedWithAnEightBitEmbeddingLoadsAndRuns) {
  test::TempDir tmp;
  SynthOptions o;
  o.like = "tiny-llama";
  o.out_dir = tmp.file("q4");
  o.bits = 4;
  o.embed_bits = 8;
  o.progress = false;
  WriteSynthCheckpoint(o);
  auto ckpt = Checkpoint::Open(o.out_dir);
  EXPECT_FALSE(ckpt->Has("model.embed_tokens.weight"));
  EXPECT_TRUE(ckpt->Has("model.embed_tokens.codes"));
  EXPECT_TRUE(ckpt->Has("model.layers.0.self_attn.q_proj.codes"));
  auto model = Model::Load(o.out_dir);
  BenchOptions b;
  b.prompt_tokens = 8;
  b.gen_tokens = 4;
  EXPECT_TRUE(RunBench(*model, b).logits_finite);
  // A bad value names the option.
  o.out_dir = tmp.file("bad");
  o.embed_bits = 5;
  EXPECT_THROW(WriteSynthCheckpoint(o), UsageError);
  EXPECT_FALSE(fs::exists(o.out_dir));
}

TEST(Synth, ShardsWithIndexAndIsDeterministic) {
  test::TempDir tmp;
  SynthOptions o;
  o.like = "tiny-llama";
  o.out_dir = tmp.file("a");
  o.shard_bytes = 64 << 10;
  o.progress = false;
  const SynthResult r = WriteSynthCheckpoint(o);
  EXPECT_GT(r.num_shards, 1);
  EXPECT_TRUE(fs::exists(tmp.file("a/model.safetensors.index.json")));
  auto a = Checkpoint::Open(o.out_dir);
  EXPECT_EQ(a->TotalBytes(), r.total_bytes);
  // Same seed, unsharded: the same bytes per tensor.
  o.out_dir = tmp.file("b");
  o.shard_bytes = uint64_t(1) << 40;
  WriteSynthCheckpoint(o);
  auto b = Checkpoint::Open(o.out_dir);
  for (const auto& name : a->Names()) {
    const TensorView x = a->View(name), y = b->View(name);
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes()), 0) << name;
  }
  // Realistic scale: linears ~N(0, 0.02), norms 1.
  const TensorView q = b->View("model.layers.0.self_attn.q_proj.weight");
  std::vector<float> v(size_t(q.numel()));
  ToF32(q, v.data());
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  EXPECT_NEAR(std::sqrt(ss / double(v.size())), 0.02, 0.002);
  const TensorView norm = b->View("model.norm.weight");
  std::vector<float> nv(size_t(norm.numel()));
  ToF32(norm, nv.data());
  for (float x : nv) EXPECT_EQ(x, 1.0f);
}

TEST(Synth, Errors) {
  test::TempDir tmp;
  SynthOptions o;
  o.like = "tiny-llama";
  o.progress = false;
  o.out_dir = tmp.file("x");
  o.layers = 3;  // tiny-llama has 2
  EXPECT_THROW(WriteSynthCheckpoint(o), UsageError);
  o.layers = 0;
  o.like = "no-such-model";
  EXPECT_THROW(WriteSynthCheckpoint(o), UsageError);
  o.like = "tiny-llama";
  fs::create_directories(tmp.file("x"));
  test::WriteFile(tmp.file("x/file"), "x");
  EXPECT_THROW(WriteSynthCheckpoint(o), UsageError);  // not empty
  EXPECT_FALSE(fs::exists(tmp.file("x/config.json")));
  // --layers 1 keeps one layer.
  o.out_dir = tmp.file("one");
  o.layers = 1;
  WriteSynthCheckpoint(o);
  EXPECT_EQ(LoadModelConfig(o.out_dir).num_layers, 1);
  EXPECT_FALSE(Checkpoint::Open(o.out_dir)->Has("model.layers.1.input_layernorm.weight"));
}

}  // namespace
}  // namespace tq
