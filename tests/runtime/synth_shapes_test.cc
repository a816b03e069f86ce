#include "runtime/synth_shapes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "core/error.h"
#include "io/model_config.h"
#include "runtime/bench.h"
#include "runtime/synth_tokenizer.h"

namespace tq {
namespace {

int64_t ParamCount(const SynthShape& s) {
  int64_t n = 0;
  for (const auto& t : SynthTensors(s, 0)) n += NumElements(t.shape);
  return n;
}

TEST(SynthShapes, ParameterCountsMatchTheHubModels) {
  // Parameter counts reported for the real checkpoints: exact only if every shape is right.
  const std::map<std::string, int64_t> want = {
      {"llama-3.2-1b", 1235814400},  {"llama-3.2-3b", 3212749824}, {"llama-3.1-8b", 8030261248},
      {"qwen2.5-7b", 7615616512},    {"qwen3-8b", 8190735360},     {"qwen3-30b-a3b", 30532122624},
      {"mixtral-8x7b", 46702792704}, {"mistral-7b", 7241732096},
  };
  for (const auto& [name, count] : want) EXPECT_EQ(ParamCount(FindSynthShape(name)), count) << name;
}

TEST(SynthShapes, SpecBuiltFamiliesNearTheirPublishedSizes) {
  // The hub cards' totals (gemma-3-27b: its text model, without the vision tower): the layer
  // spec's tensors must come within 1% (the cards round).
  const std::map<std::string, double> want = {
      {"gemma-3-27b", 27.0e9},
      {"gpt-oss-20b", 20.9e9},
      {"gpt-oss-120b", 116.8e9},  // the card's "117B", 116.8B in OpenAI's model card
      {"deepseek-v2-lite", 15.7e9},
      {"nemotron-h-8b", 8.1e9},  // 8,100,852,736 in the checkpoint's tensors
      // The card's 35B: the text model here, without the vision tower and the MTP layer
      // (each ~0.4-0.8B), so within 3%.
      {"qwen3.6-35b-a3b", 35.0e9}};
  for (const auto& [name, count] : want) {
    const double got = double(ParamCount(FindSynthShape(name)));
    EXPECT_NEAR(got / count, 1.0, name == "qwen3.6-35b-a3b" ? 0.03 : 0.01) << name << ": " << got;
    std::printf("%s: %.4g parameters\n", name.c_str(), got);
  }
}

TEST(SynthShapes, PackedGptOssWritesOneLinearPerExpert) {
  // synth --bits lays gpt_oss's experts out as convert writes them: the same parameters, per
  // expert [out, in] with a bias, no fused tensor.
  const SynthShape& s = FindSynthShape("gpt-oss-20b");
  int64_t fused = 0, per = 0;
  std::map<std::string, Shape> names;
  for (const auto& t : SynthTensors(s, 2)) fused += NumElements(t.shape);
  for (const auto& t : SynthTensors(s, 2, ExpertLayout::kPerExpert)) {
    per += NumElements(t.shape);
    names[t.name] = t.shape;
  }
  EXPECT_EQ(per, fused);
  EXPECT_FALSE(names.count("model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_EQ(names.at("model.layers.1.mlp.experts.31.gate_proj.weight"), (Shape{2880, 2880}));
  EXPECT_EQ(names.at("model.layers.1.mlp.experts.31.down_proj.bias"), (Shape{2880}));
}

TEST(SynthShapes, ConfigParsesBackToTheShape) {
  for (const auto& s : SynthShapes()) {
    const nlohmann::json j = SynthConfigJson(s, 0);
    const ModelConfig c = ParseModelConfig(j.dump(), s.name);
    EXPECT_EQ(c.model_type, s.model_type) << s.name;
    EXPECT_EQ(c.hidden_size, s.hidden) << s.name;
    EXPECT_EQ(c.num_layers, s.layers) << s.name;
    EXPECT_EQ(c.num_heads, s.heads) << s.name;
    EXPECT_EQ(c.num_kv_heads, s.kv_heads) << s.name;
    EXPECT_EQ(c.head_dim, s.head_dim) << s.name;
    EXPECT_EQ(c.vocab_size, s.vocab) << s.name;
    EXPECT_EQ(c.tie_word_embeddings, s.tie_embeddings) << s.name;
    EXPECT_EQ(c.attention_bias, s.qkv_bias) << s.name;
    EXPECT_EQ(c.max_position_embeddings, s.max_position_embeddings) << s.name;
    EXPECT_GE(c.max_position_embeddings, 8192) << s.name;  // nemotron-h-8b's is 8K, the rest >= 32K
    EXPECT_EQ(c.num_experts, s.experts) << s.name;
    EXPECT_EQ(c.num_experts_per_tok, s.experts_per_tok) << s.name;
    if (s.model_type == "qwen3_moe") {
      EXPECT_EQ(c.moe_intermediate_size, s.moe_intermediate);
    }
    if (s.model_type == "qwen3" || s.model_type == "qwen3_moe") {
      EXPECT_TRUE(c.qk_norm) << s.name;
    }
    if (s.llama3_rope_factor > 0) {
      EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3) << s.name;
      EXPECT_EQ(c.rope_scaling.factor, s.llama3_rope_factor) << s.name;
      EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192) << s.name;
    }
  }
  // --layers keeps fewer layers.
  const ModelConfig c =
      ParseModelConfig(SynthConfigJson(FindSynthShape("qwen3-8b"), 3).dump(), "qwen3-8b");
  EXPECT_EQ(c.num_layers, 3);
}

TEST(SynthShapes, SpecificValues) {
  const auto& l1 = FindSynthShape("llama-3.2-1b");
  EXPECT_EQ(l1.hidden, 2048);
  EXPECT_EQ(l1.intermediate, 8192);
  EXPECT_EQ(l1.layers, 16);
  EXPECT_TRUE(l1.tie_embeddings);
  EXPECT_TRUE(FindSynthShape("llama-3.2-3b").tie_embeddings);
  EXPECT_FALSE(FindSynthShape("llama-3.1-8b").tie_embeddings);
  EXPECT_EQ(FindSynthShape("llama-3.1-8b").llama3_rope_factor, 8.0);
  EXPECT_EQ(FindSynthShape("qwen2.5-7b").vocab, 152064);
  EXPECT_EQ(FindSynthShape("qwen3-8b").vocab, 151936);
  EXPECT_EQ(FindSynthShape("mixtral-8x7b").vocab, 32000);
  EXPECT_EQ(FindSynthShape("mistral-7b").vocab, 32000);
  EXPECT_EQ(FindSynthShape("mistral-7b").kv_heads, 8);
  const auto& moe = FindSynthShape("qwen3-30b-a3b");
  EXPECT_EQ(moe.experts, 128);
  EXPECT_EQ(moe.experts_per_tok, 8);
  EXPECT_EQ(moe.moe_intermediate, 768);
}

TEST(SynthShapes, TensorNamesPerArchitecture) {
  std::map<std::string, Shape> t;
  for (const auto& x : SynthTensors(FindSynthShape("qwen2.5-7b"), 1)) t[x.name] = x.shape;
  EXPECT_EQ(t.at("model.layers.0.self_attn.k_proj.bias"), (Shape{512}));
  EXPECT_EQ(t.at("lm_head.weight"), (Shape{152064, 3584}));
  EXPECT_FALSE(t.count("model.layers.1.input_layernorm.weight"));
  t.clear();
  for (const auto& x : SynthTensors(FindSynthShape("mixtral-8x7b"), 1)) t[x.name] = x.shape;
  EXPECT_EQ(t.at("model.layers.0.block_sparse_moe.gate.weight"), (Shape{8, 4096}));
  EXPECT_EQ(t.at("model.layers.0.block_sparse_moe.experts.7.w2.weight"), (Shape{4096, 14336}));
  t.clear();
  for (const auto& x : SynthTensors(FindSynthShape("qwen3-30b-a3b"), 1)) t[x.name] = x.shape;
  EXPECT_EQ(t.at("model.layers.0.mlp.experts.127.down_proj.weight"), (Shape{2048, 768}));
  EXPECT_EQ(t.at("model.layers.0.self_attn.q_norm.weight"), (Shape{128}));
  t.clear();
  for (const auto& x : SynthTensors(FindSynthShape("llama-3.2-1b"), 1)) t[x.name] = x.shape;
  EXPECT_FALSE(t.count("lm_head.weight"));  // tied
}

TEST(SynthShapes, UnknownNameListsKnownOnes) {
  try {
    FindSynthShape("gpt-5");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("llama-3.2-1b"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("tiny-llama"), std::string::npos);  // test shape hidden
  }
}

TEST(SynthTokenizer, VocabularyHasTheModelSizeAndSpecialIds) {
  const auto f = MakeSynthTokenizer(SynthTokenizerStyle::kLlama3, 128256);
  const auto& vocab = f.tokenizer["model"]["vocab"];
  EXPECT_EQ(vocab.size(), 128256u);
  EXPECT_EQ(vocab["<|begin_of_text|>"], 128000);
  EXPECT_EQ(vocab["<|eot_id|>"], 128009);
  EXPECT_EQ(f.tokenizer["model"]["merges"].size(), 128000u - 256u);
  EXPECT_EQ(f.generation_config["eos_token_id"], nlohmann::json({128001, 128008, 128009}));
  // Every id in [0, vocab) exactly once.
  std::vector<int> seen(128256, 0);
  for (const auto& [tok, id] : vocab.items()) seen[size_t(id.get<int64_t>())]++;
  for (int s : seen) ASSERT_EQ(s, 1);

  const auto m = MakeSynthTokenizer(SynthTokenizerStyle::kMistral, 32000);
  EXPECT_EQ(m.tokenizer["model"]["vocab"]["<s>"], 1);
  EXPECT_EQ(m.tokenizer["model"]["vocab"]["</s>"], 2);
  EXPECT_EQ(m.tokenizer["model"]["vocab"].size(), 32000u);
  EXPECT_THROW(MakeSynthTokenizer(SynthTokenizerStyle::kQwen, 300), Error);
}

}  // namespace
}  // namespace tq

namespace tq {
namespace {

TEST(BenchEstimate, DecodeWeightBytesPerToken) {
  auto config = [](const char* name) {
    return ParseModelConfig(SynthConfigJson(FindSynthShape(name), 0).dump(), name);
  };
  const int64_t gb = int64_t(1) << 30;
  // Tied embeddings: the table is read whole as the LM head.
  EXPECT_EQ(DecodeWeightBytesPerToken(config("llama-3.2-1b"), gb), gb);
  // Untied: the input table (0.5 GB of 16 GB) is not read.
  const double l8 = double(DecodeWeightBytesPerToken(config("llama-3.1-8b"), gb)) / double(gb);
  EXPECT_NEAR(l8, 1.0 - 128256.0 * 4096 / 8030261248.0, 1e-3);
  // Qwen3-30B-A3B reads about 3B of its 30.5B parameters per token.
  const double moe = double(DecodeWeightBytesPerToken(config("qwen3-30b-a3b"), gb)) / double(gb);
  EXPECT_NEAR(moe, 3.04e9 / 30.53e9, 0.005);
}

}  // namespace
}  // namespace tq
