// Every architecture on a tiny random checkpoint against the naive decoder of synthetic_model.cc
// (llama untied/tied/biased, RoPE linear/llama3/yarn, mistral sliding window, qwen2 biases with a
// per-layer window, qwen3 q/k-norm, qwen3_moe, mixtral), RoPE frequencies against the Hugging Face
// formulas, and the errors a broken checkpoint gives.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/model_config.h"
#include "model/model.h"
#include "model/rope.h"
#include "synthetic_model.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using test::SynthSpec;

struct Case {
  std::string name;
  SynthSpec spec;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  c.push_back({"llama", {}});
  SynthSpec s;
  s.tie = true;
  s.attention_bias = true;
  s.dtype = DType::F16;
  c.push_back({"llama_tied_bias_f16", s});
  s = {};
  s.rope_scaling = R"({"rope_type": "linear", "factor": 2.0})";
  c.push_back({"llama_rope_linear", s});
  s.rope_scaling = R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 64})";
  c.push_back({"llama_rope_llama3", s});
  s.rope_scaling =
      R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})";
  c.push_back({"llama_rope_yarn", s});
  s = {};
  s.model_type = "mistral";
  s.sliding_window = 3;
  c.push_back({"mistral_window", s});
  s = {};
  s.model_type = "qwen2";
  s.sliding_window = 4;
  s.max_window_layers = 1;  // layer 0 full attention, layer 1 windowed
  s.dtype = DType::BF16;
  s.tie = true;
  c.push_back({"qwen2_bias_window_bf16", s});
  s = {};
  s.model_type = "qwen3";
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 16;  // q width 32 = hidden, but head_dim independent of hidden/heads
  c.push_back({"qwen3_qk_norm", s});
  s = {};
  s.model_type = "qwen3_moe";
  s.experts = 5;
  s.top_k = 2;
  s.moe_ffn = 12;
  s.norm_topk_prob = false;
  s.mlp_only_layers = {0};
  s.layers = 3;
  c.push_back({"qwen3_moe_unnormalized", s});
  s.norm_topk_prob = true;
  s.mlp_only_layers = {};
  s.decoder_sparse_step = 2;  // layer 1 MoE, layers 0 and 2 dense
  c.push_back({"qwen3_moe_sparse_step", s});
  s = {};
  s.model_type = "mixtral";
  s.experts = 4;
  s.top_k = 2;
  s.moe_ffn = 20;
  s.sliding_window = 5;
  c.push_back({"mixtral", s});
  return c;
}

class SyntheticTest : public ::testing::TestWithParam<Case> {};

TEST_P(SyntheticTest, LogitsMatchNaiveDecoder) {
  const SynthSpec& spec = GetParam().spec;
  test::TempDir dir;
  const test::TensorMap w = test::WriteSyntheticModel(spec, dir.path().string(), 42);
  auto model = Model::Load(dir.path().string());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 13; ++i) tokens.push_back(int32_t((i * 17 + 3) % spec.vocab));
  const auto want = test::NaiveForward(spec, w, tokens);
  const int64_t T = int64_t(tokens.size()), V = spec.vocab;
  double scale = 0;
  for (double x : want) scale = std::max(scale, std::fabs(x));

  // One chunk, every logit.
  std::vector<float> got(static_cast<size_t>(T * V));
  auto cache = model->NewCache({.max_tokens = 32, .dtype = KvDType::kF32});
  model->Forward(tokens, *cache, got.data(), true);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
  EXPECT_LT(err, 1e-4 * std::max(1.0, scale)) << "max |logit| " << scale;

  // Chunks of 6, 1, 6 through the cache (positions beyond any window).
  auto chunked = model->NewCache({.max_tokens = 32, .dtype = KvDType::kF32});
  std::vector<float> last(static_cast<size_t>(V));
  int64_t begin = 0;
  for (int64_t len : {6, 1, 6}) {
    model->Forward(std::span(tokens).subspan(size_t(begin), size_t(len)), *chunked, last.data());
    begin += len;
    for (int64_t i = 0; i < V; ++i)
      ASSERT_NEAR(last[size_t(i)], want[size_t((begin - 1) * V + i)], 1e-4 * std::max(1.0, scale));
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, SyntheticTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(SyntheticModel, LongPromptsRunInChunksWithTheSameResult) {
  // Forward splits prompts longer than its chunk (512) internally; pieces of 150 through the cache
  // must give the same logits at every piece end.
  SynthSpec spec;
  spec.model_type = "mistral";
  spec.sliding_window = 200;
  spec.max_position_embeddings = 1024;
  test::TempDir dir;
  test::WriteSyntheticModel(spec, dir.path().string(), 7);
  auto model = Model::Load(dir.path().string());
  const int64_t T = 700, V = spec.vocab;
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < T; ++i) tokens.push_back(int32_t((i * 31 + 7) % V));
  std::vector<float> all(static_cast<size_t>(T * V)), last(static_cast<size_t>(V));
  auto one = model->NewCache({.max_tokens = T, .dtype = KvDType::kF32});
  model->Forward(tokens, *one, all.data(), true);
  EXPECT_EQ(one->size(), T);
  auto pieces = model->NewCache({.max_tokens = T, .dtype = KvDType::kF32});
  for (int64_t begin = 0; begin < T; begin += 150) {
    const int64_t len = std::min<int64_t>(150, T - begin);
    model->Forward(std::span(tokens).subspan(size_t(begin), size_t(len)), *pieces, last.data());
    for (int64_t i = 0; i < V; ++i)
      ASSERT_NEAR(last[size_t(i)], all[size_t((begin + len - 1) * V + i)], 1e-3) << begin;
  }
  // A bad token in a later chunk is refused before the first chunk touches the cache.
  std::vector<int32_t> bad = tokens;
  bad[600] = int32_t(V);
  auto untouched = model->NewCache({.max_tokens = T});
  EXPECT_THROW(model->Forward(bad, *untouched, all.data(), true), Error);
  EXPECT_EQ(untouched->size(), 0);
  // Last-token logits of the whole prompt equal the last row of `all`.
  auto again = model->NewCache({.max_tokens = T, .dtype = KvDType::kF32});
  model->Forward(tokens, *again, last.data());
  for (int64_t i = 0; i < V; ++i) EXPECT_NEAR(last[size_t(i)], all[size_t((T - 1) * V + i)], 1e-4);
}

ModelConfig RopeConfig(int64_t max_pos, double theta, RopeScaling rs) {
  ModelConfig c;
  c.max_position_embeddings = max_pos;
  c.rope_theta = theta;
  c.rope_scaling = rs;
  return c;
}

// Ours follow Hugging Face's fp32 arithmetic; the hand values are double: 1e-6 relative.
void ExpectSameFrequencies(const RopeFrequencies& got, const test::HandRope& want) {
  ASSERT_EQ(got.inv_freq.size(), want.inv_freq.size());
  for (size_t i = 0; i < got.inv_freq.size(); ++i)
    EXPECT_NEAR(got.inv_freq[i], want.inv_freq[i], 1e-6 * want.inv_freq[i]) << "i = " << i;
  EXPECT_NEAR(got.attention_factor, want.attention_factor, 1e-6);
}

TEST(Rope, DefaultMatchesKnownValues) {
  const RopeFrequencies f = ComputeRopeFrequencies(RopeConfig(4096, 10000, {}), 64);
  ASSERT_EQ(f.inv_freq.size(), 32u);
  EXPECT_FLOAT_EQ(f.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(f.inv_freq[1], 0.7498942093324559f);     // 10000^(-2/64)
  EXPECT_FLOAT_EQ(f.inv_freq[31], 1.333521432163324e-4f);  // 10000^(-62/64)
  EXPECT_EQ(f.attention_factor, 1.0f);
}

TEST(Rope, Llama31ScalingMatchesHandFormula) {
  // Llama 3.1 8B: theta 500000, factor 8, low 1, high 4, original context 8192, head_dim 128.
  RopeScaling rs;
  rs.type = RopeScaling::Type::kLlama3;
  rs.factor = 8;
  rs.low_freq_factor = 1;
  rs.high_freq_factor = 4;
  rs.original_max_position_embeddings = 8192;
  SynthSpec s;
  s.head_dim = 128;
  s.rope_theta = 500000;
  s.rope_scaling = R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})";
  const auto f = ComputeRopeFrequencies(RopeConfig(131072, 500000, rs), 128);
  ExpectSameFrequencies(f, test::HandRopeFrequencies(s));
  // The three regimes: the first pair unchanged, the last divided by the factor.
  EXPECT_FLOAT_EQ(f.inv_freq[0], 1.0f);
  EXPECT_NEAR(f.inv_freq[63], std::pow(500000.0, -126.0 / 128) / 8, 1e-12);
}

TEST(Rope, LinearAndYarnMatchHandFormula) {
  RopeScaling lin;
  lin.type = RopeScaling::Type::kLinear;
  lin.factor = 4;
  SynthSpec s;
  s.head_dim = 128;
  s.rope_theta = 1000000;
  s.rope_scaling = R"({"rope_type": "linear", "factor": 4.0})";
  ExpectSameFrequencies(ComputeRopeFrequencies(RopeConfig(32768, 1e6, lin), 128),
                        test::HandRopeFrequencies(s));
  // Qwen-style YaRN: factor 4 over an original context of 32768.
  RopeScaling yarn;
  yarn.type = RopeScaling::Type::kYarn;
  yarn.factor = 4;
  yarn.original_max_position_embeddings = 32768;
  s.max_position_embeddings = 131072;
  s.rope_scaling =
      R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})";
  const auto f = ComputeRopeFrequencies(RopeConfig(131072, 1e6, yarn), 128);
  ExpectSameFrequencies(f, test::HandRopeFrequencies(s));
  EXPECT_NEAR(f.attention_factor, 0.1 * std::log(4.0) + 1, 1e-6);
  yarn.attention_factor = 1.5;
  EXPECT_FLOAT_EQ(ComputeRopeFrequencies(RopeConfig(131072, 1e6, yarn), 128).attention_factor,
                  1.5f);
}

TEST(Rope, BadParametersThrow) {
  EXPECT_THROW(ComputeRopeFrequencies(RopeConfig(4096, 10000, {}), 7), Error);
  EXPECT_THROW(ComputeRopeFrequencies(RopeConfig(4096, 0, {}), 64), Error);
  RopeScaling rs;
  rs.type = RopeScaling::Type::kLlama3;
  rs.factor = 8;
  rs.original_max_position_embeddings = 0;
  EXPECT_THROW(ComputeRopeFrequencies(RopeConfig(4096, 10000, rs), 64), Error);
}

// Loading errors name what is wrong.
void ExpectLoadError(const std::string& dir, const std::string& needle) {
  try {
    Model::Load(dir);
    ADD_FAILURE() << "no error, expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelLoad, BrokenCheckpointsGiveNamedErrors) {
  test::TempDir dir;
  const std::string d = dir.path().string();
  SynthSpec s;
  test::WriteSyntheticModel(s, d, 1);
  ASSERT_NO_THROW(Model::Load(d));
  // A missing tensor: write qwen2-shaped config over llama weights (no q/k/v biases).
  s.model_type = "qwen2";
  {
    test::TempDir other;
    SynthSpec llama;
    test::WriteSyntheticModel(llama, other.path().string(), 1);
    std::filesystem::copy_file(other.path() / "model.safetensors", dir.path() / "x.safetensors");
  }
  test::WriteSyntheticModel(s, d, 1);
  std::filesystem::rename(dir.path() / "x.safetensors", dir.path() / "model.safetensors");
  ExpectLoadError(d, "model.layers.0.self_attn.q_proj.bias");
  // A shape mismatch: the config claims a wider FFN than the tensors have.
  SynthSpec wide;
  test::WriteSyntheticModel(wide, d, 1);
  std::string cfg = ReadFileToString(d + "/config.json");
  cfg.replace(cfg.find("\"intermediate_size\": 24"), 23, "\"intermediate_size\": 25");
  test::WriteFile(d + "/config.json", cfg);
  ExpectLoadError(d, "model.layers.0.mlp.gate_proj.weight");
  // An unsupported activation.
  test::WriteSyntheticModel(wide, d, 1);
  cfg = ReadFileToString(d + "/config.json");
  cfg.replace(cfg.find("\"silu\""), 6, "\"gelu\"");
  test::WriteFile(d + "/config.json", cfg);
  ExpectLoadError(d, "hidden_act");
}

TEST(ModelLoad, UnknownArchitectureListsSupportedOnes) {
  test::TempDir dir;
  test::WriteSyntheticModel({}, dir.path().string(), 1);
  std::string cfg = ReadFileToString(dir.file("config.json"));
  cfg.replace(cfg.find("\"llama\""), 7, "\"gpt_neox\"");
  test::WriteFile(dir.file("config.json"), cfg);
  ExpectLoadError(dir.path().string(), "gpt_neox");
}

}  // namespace
}  // namespace tq
