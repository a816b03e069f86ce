#include "io/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json Base(const std::string& type) {
  return json{{"model_type", type},       {"architectures", {"XForCausalLM"}},
              {"vocab_size", 1000},       {"hidden_size", 256},
              {"intermediate_size", 512}, {"num_hidden_layers", 4},
              {"num_attention_heads", 8}};
}

ModelConfig P(const json& j) { return ParseModelConfig(j.dump(), "config test.json"); }

std::string ErrorOf(const json& j) {
  try {
    P(j);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[config test.json]"));
    return e.what();
  }
  ADD_FAILURE() << "no error for " << j.dump();
  return "";
}

TEST(ModelConfig, SharedLlama) {
  const ModelConfig c = LoadModelConfig(test::ModelDir("tq-llama-21m"));
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 8192);
  EXPECT_EQ(c.hidden_size, 512);
  EXPECT_EQ(c.intermediate_size, 1408);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.is_moe());
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_FALSE(c.raw_json.empty());
  for (int l = 0; l < 6; ++l) EXPECT_FALSE(c.LayerIsMoe(l) || c.LayerIsSliding(l));

  const GenerationConfig g = LoadGenerationConfig(test::ModelDir("tq-llama-21m"));
  EXPECT_EQ(g.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_DOUBLE_EQ(*g.temperature, 0.8);
  EXPECT_DOUBLE_EQ(*g.top_p, 0.95);
  EXPECT_TRUE(*g.do_sample);
  EXPECT_FALSE(g.top_k.has_value());
}

TEST(ModelConfig, SharedQwen3Moe) {
  const ModelConfig c = LoadModelConfig(test::ModelDir("tq-qwen3moe-17m"));
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 96);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.decoder_sparse_step, 1);
  EXPECT_TRUE(c.mlp_only_layers.empty());
  EXPECT_EQ(c.sliding_window, 0);  // null + use_sliding_window false
  for (int l = 0; l < 6; ++l) {
    EXPECT_TRUE(c.LayerIsMoe(l));
    EXPECT_FALSE(c.LayerIsSliding(l));
  }
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{0});
  const GenerationConfig g = LoadGenerationConfig(test::ModelDir("tq-qwen3moe-17m"));
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(g.top_k, 20);
}

TEST(ModelConfig, Defaults) {
  const ModelConfig c = P(Base("llama"));
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_TRUE(c.bos_token_ids.empty());
  EXPECT_EQ(P(Base("qwen3")).head_dim, 128);  // Qwen3Config's default
  json mixtral = Base("mixtral");
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  EXPECT_DOUBLE_EQ(P(mixtral).rope_theta, 1e6);
  json null_kv = Base("llama");
  null_kv["num_key_value_heads"] = nullptr;
  null_kv["head_dim"] = nullptr;
  EXPECT_EQ(P(null_kv).num_kv_heads, 8);
  EXPECT_EQ(P(null_kv).head_dim, 32);
}

TEST(ModelConfig, LlamaBiasKeys) {
  json j = Base("llama");
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  const ModelConfig c = P(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
}

TEST(ModelConfig, Qwen2AlwaysHasQkvBiasAndSlidingRules) {
  json j = Base("qwen2");
  EXPECT_TRUE(P(j).attention_bias);
  EXPECT_FALSE(P(j).qk_norm);
  j["sliding_window"] = 1024;
  j["max_window_layers"] = 2;
  EXPECT_EQ(P(j).sliding_window, 0);  // use_sliding_window absent -> off
  j["use_sliding_window"] = true;
  const ModelConfig c = P(j);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_FALSE(c.LayerIsSliding(0));
  EXPECT_FALSE(c.LayerIsSliding(1));
  EXPECT_TRUE(c.LayerIsSliding(2));
  EXPECT_TRUE(c.LayerIsSliding(3));
  EXPECT_FALSE(c.LayerIsSliding(4));  // out of range
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  const ModelConfig lt = P(j);
  EXPECT_TRUE(lt.LayerIsSliding(0));
  EXPECT_FALSE(lt.LayerIsSliding(3));
  j["layer_types"] = {"sliding_attention"};
  EXPECT_THAT(ErrorOf(j), HasSubstr("layer_types"));
}

TEST(ModelConfig, Qwen3) {
  json j = Base("qwen3");
  j["head_dim"] = 64;
  j["attention_bias"] = true;
  const ModelConfig c = P(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 64);
}

TEST(ModelConfig, MistralSlidingWindow) {
  json j = Base("mistral");
  EXPECT_EQ(P(j).sliding_window, 4096);  // MistralConfig's default
  j["sliding_window"] = nullptr;
  EXPECT_EQ(P(j).sliding_window, 0);
  j["sliding_window"] = 512;
  j["attention_bias"] = true;  // not a Mistral key
  const ModelConfig c = P(j);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_FALSE(c.attention_bias);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c.LayerIsSliding(l));
}

TEST(ModelConfig, Mixtral) {
  json j = Base("mixtral");
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["sliding_window"] = nullptr;
  const ModelConfig c = P(j);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c.LayerIsMoe(l));
  EXPECT_FALSE(c.LayerIsSliding(0));
  j.erase("num_local_experts");
  EXPECT_THAT(ErrorOf(j), HasSubstr("'num_local_experts': required"));
}

TEST(ModelConfig, Qwen3MoeSparseLayers) {
  json j = Base("qwen3_moe");
  j["num_experts"] = 16;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 64;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  const ModelConfig c = P(j);
  EXPECT_FALSE(c.norm_topk_prob);  // Qwen3MoeConfig's default
  EXPECT_FALSE(c.LayerIsMoe(0));
  EXPECT_TRUE(c.LayerIsMoe(1));
  EXPECT_FALSE(c.LayerIsMoe(2));
  EXPECT_FALSE(c.LayerIsMoe(3));  // (3+1)%2 == 0 but listed in mlp_only_layers
  j["mlp_only_layers"] = {7};
  EXPECT_THAT(ErrorOf(j), HasSubstr("mlp_only_layers"));
  j["mlp_only_layers"] = json::array();
  j["decoder_sparse_step"] = 0;
  EXPECT_THAT(ErrorOf(j), HasSubstr("decoder_sparse_step"));
  j["decoder_sparse_step"] = 1;
  j["num_experts_per_tok"] = 17;
  EXPECT_THAT(ErrorOf(j), HasSubstr("num_experts_per_tok"));
}

TEST(ModelConfig, RopeVariants) {
  json j = Base("llama");
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ModelConfig c = P(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2}};
  EXPECT_EQ(P(j).rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_DOUBLE_EQ(P(j).rope_scaling.factor, 2.0);
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2}};
  EXPECT_EQ(P(j).rope_scaling.type, RopeScaling::Type::kDynamic);
  EXPECT_EQ(P(j).rope_scaling.original_max_position_embeddings, 2048);

  j["rope_scaling"] = {{"rope_type", "yarn"},
                       {"factor", 4.0},
                       {"original_max_position_embeddings", 32768},
                       {"beta_fast", 16},
                       {"mscale", 0.707}};
  c = P(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kYarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(*c.rope_scaling.mscale, 0.707);
  EXPECT_FALSE(c.rope_scaling.attention_factor.has_value());

  // transformers >= 5: rope_parameters carries the theta and the type.
  json v5 = Base("qwen3");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  c = P(v5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  v5["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 5e5}, {"factor", 4.0}};
  c = P(v5);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kYarn);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);  // max_position default
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 7.0}}}};
  EXPECT_DOUBLE_EQ(P(v5).rope_theta, 7.0);

  // Errors.
  j["rope_scaling"] = {{"type", "longrope"}, {"factor", 2}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("unsupported rope type 'longrope'"));
  j["rope_scaling"] = {{"type", "linear"}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling.factor"));
  j["rope_scaling"] = {{"factor", 2}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling.rope_type"));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("original_max_position_embeddings"));
  j["rope_scaling"] = "linear";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'rope_scaling'"));
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = -1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_theta"));
  j["rope_theta"] = "big";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'rope_theta': expected a number"));
}

TEST(ModelConfig, TokenIds) {
  json j = Base("llama");
  j["eos_token_id"] = {128001, 128009};
  j["bos_token_id"] = 128000;
  const ModelConfig c = P(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128009}));
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{128000});
  j["eos_token_id"] = "2";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'eos_token_id'"));
  j["eos_token_id"] = {1, "x"};
  EXPECT_THAT(ErrorOf(j), HasSubstr("'eos_token_id'"));
}

TEST(ModelConfig, Errors) {
  EXPECT_THAT(ErrorOf(Base("gpt2")),
              HasSubstr("unsupported model_type 'gpt2' (supported: llama, mistral, qwen2, qwen3, "
                        "qwen3_moe, mixtral, gemma2, gemma3_text, gemma4_text, phi3, qwen2_moe, "
                        "gpt_oss, qwen3_next, qwen3_5_text, qwen3_5_moe_text, nemotron_h, "
                        "deepseek_v2, deepseek_v3)"));
  json j = Base("llama");
  j.erase("model_type");
  EXPECT_THAT(ErrorOf(j), HasSubstr("'model_type'"));
  j = Base("llama");
  j.erase("hidden_size");
  EXPECT_THAT(ErrorOf(j), HasSubstr("field 'hidden_size': required"));
  j = Base("llama");
  j["num_hidden_layers"] = "6";
  EXPECT_THAT(ErrorOf(j), HasSubstr("field 'num_hidden_layers': expected an integer"));
  j["num_hidden_layers"] = 6.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'num_hidden_layers'"));
  j["num_hidden_layers"] = 0;
  EXPECT_THAT(ErrorOf(j), HasSubstr("out of range"));
  j["num_hidden_layers"] = 1LL << 40;
  EXPECT_THAT(ErrorOf(j), HasSubstr("out of range"));
  j = Base("llama");
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(ErrorOf(j), HasSubstr("does not divide"));
  j = Base("llama");
  j["num_attention_heads"] = 7;
  EXPECT_THAT(ErrorOf(j), HasSubstr("head_dim"));
  j = Base("llama");
  j["tie_word_embeddings"] = 1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'tie_word_embeddings': expected true/false"));
  j = Base("llama");
  j["architectures"] = "Llama";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'architectures'"));
  j = Base("llama");
  j["rms_norm_eps"] = 0;
  EXPECT_THAT(ErrorOf(j), HasSubstr("rms_norm_eps"));
  EXPECT_THAT(ErrorOf(json::array()), HasSubstr("expected a JSON object"));
  try {
    ParseModelConfig("{\"model_type\": ", "config x.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[config x.json] invalid JSON"));
  }
}

TEST(ModelConfig, EverySupportedTypeParses) {
  for (const auto& t : SupportedModelTypes()) {
    SCOPED_TRACE(t);
    json j = Base(t);
    j["num_experts"] = 4;
    j["num_local_experts"] = 4;
    j["num_experts_per_tok"] = 2;
    j["moe_intermediate_size"] = 32;
    j["n_routed_experts"] = 4;              // deepseek, nemotron_h
    j["hybrid_override_pattern"] = "M-*E";  // nemotron_h
    j["kv_lora_rank"] = 16;                 // deepseek MLA
    j["qk_nope_head_dim"] = 16;
    j["qk_rope_head_dim"] = 8;
    j["v_head_dim"] = 16;
    const ModelConfig c = P(j);
    EXPECT_EQ(c.model_type, t);
    const bool dense = t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" ||
                       t == "gemma2" || t == "gemma3_text" || t == "gemma4_text" || t == "phi3" ||
                       t == "qwen3_5_text";
    EXPECT_EQ(c.is_moe(), !dense);
  }
}

TEST(GenerationConfig, ParseAndErrors) {
  const auto g = ParseGenerationConfig(
      R"({"eos_token_id": [1, 2], "pad_token_id": 0, "top_k": 5, "min_p": 0.1,
          "repetition_penalty": 1.1, "max_new_tokens": 64, "do_sample": false})",
      "generation_config g.json");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(g.pad_token_id, 0);
  EXPECT_EQ(g.top_k, 5);
  EXPECT_EQ(g.max_new_tokens, 64);
  EXPECT_FALSE(*g.do_sample);
  EXPECT_FALSE(g.temperature.has_value());
  try {
    ParseGenerationConfig(R"({"temperature": "hot"})", "generation_config g.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[generation_config g.json] field 'temperature'"));
  }
  test::TempDir d;
  const auto empty = LoadGenerationConfig(d.path().string());
  EXPECT_TRUE(empty.eos_token_ids.empty());
  EXPECT_FALSE(empty.temperature.has_value());
  EXPECT_THROW(LoadModelConfig(d.path().string()), Error);
}

}  // namespace
}  // namespace tq
