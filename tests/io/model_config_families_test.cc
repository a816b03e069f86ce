// config.json of the twelve families in ../shared/models/arch (as transformers 5.17 writes them),
// multimodal wrappers (text_config), hub variants (hybrid_override_pattern, rope_local_base_freq)
// and the errors for broken family sections.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/model_config.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

ModelConfig Arch(const std::string& name) {
  return LoadModelConfig(test::ModelDir("arch/tq-arch-" + name));
}
json ArchJson(const std::string& name) {
  return json::parse(ReadFileToString(test::ModelDir("arch/tq-arch-" + name) + "/config.json"));
}
ModelConfig P(const json& j) { return ParseModelConfig(j.dump(), "config test.json"); }
std::string ErrorOf(const json& j) {
  try {
    P(j);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[config test.json]"));
    return e.what();
  }
  ADD_FAILURE() << "no error for " << j.dump().substr(0, 200);
  return "";
}

TEST(FamilyConfig, Gemma2) {
  const ModelConfig c = Arch("gemma2");
  EXPECT_EQ(c.model_type, "gemma2");
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");  // from hidden_activation
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_DOUBLE_EQ(*c.query_pre_attn_scalar, 32);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 50);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 30);
  EXPECT_EQ(c.sliding_window, 8);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.LayerIsSliding(l), l % 2 == 0) << l;
  EXPECT_FALSE(c.sliding_rope.has_value());
  EXPECT_FALSE(c.is_moe());
}

TEST(FamilyConfig, Gemma3TextLocalAndGlobalRope) {
  const ModelConfig c = Arch("gemma3-text");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 0);  // null
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  ASSERT_TRUE(c.sliding_rope.has_value());
  EXPECT_DOUBLE_EQ(c.sliding_rope->theta, 1e4);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.LayerIsSliding(l), l % 2 == 0) << l;

  // The hub's older form: rope_local_base_freq, no layer_types (pattern 6).
  json j = ArchJson("gemma3-text");
  j.erase("rope_parameters");
  j.erase("layer_types");
  j["rope_theta"] = 1e6;
  j["rope_local_base_freq"] = 1e4;
  j["num_hidden_layers"] = 12;
  j["sliding_window_pattern"] = 6;
  const ModelConfig o = P(j);
  ASSERT_TRUE(o.sliding_rope.has_value());
  EXPECT_DOUBLE_EQ(o.sliding_rope->theta, 1e4);
  for (int l = 0; l < 12; ++l) EXPECT_EQ(o.LayerIsSliding(l), (l + 1) % 6 != 0) << l;
}

TEST(FamilyConfig, Gemma4PerLayerOverrides) {
  const ModelConfig c = Arch("gemma4-text");
  EXPECT_EQ(c.hidden_size_per_layer_input, 16);
  EXPECT_EQ(c.vocab_size_per_layer_input, 8192);
  EXPECT_EQ(c.layer_head_dim, (std::vector<int64_t>{0, 512, 0, 512}));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kProportional);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  ASSERT_TRUE(c.sliding_rope.has_value());
  EXPECT_DOUBLE_EQ(c.sliding_rope->partial_rotary_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 30);

  json j = ArchJson("gemma4-text");
  j["per_layer_config"] = {{"7", {{"head_dim", 64}}}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("per_layer_config"));
  j["per_layer_config"] = {{"1", {{"sliding_window", 64}}}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("unsupported per-layer override"));
  j = ArchJson("gemma4-text");
  j["enable_moe_block"] = true;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'enable_moe_block'"));
}

TEST(FamilyConfig, Phi3) {
  const ModelConfig c = Arch("phi3");
  EXPECT_EQ(c.sliding_window, 0);  // null
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_FALSE(c.attention_bias);
  json j = ArchJson("phi3");
  j["sliding_window"] = 2047;
  const ModelConfig s = P(j);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(s.LayerIsSliding(l));
}

TEST(FamilyConfig, Qwen2MoeSharedExpert) {
  const ModelConfig c = Arch("qwen2-moe");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_EQ(c.shared_expert_intermediate_size, 128);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.scoring_func, "softmax");
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c.LayerIsMoe(l));
}

TEST(FamilyConfig, GptOss) {
  const ModelConfig c = Arch("gpt-oss");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.moe_intermediate_size, 128);
  EXPECT_EQ(c.scoring_func, "softmax_topk");
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kYarn);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_DOUBLE_EQ(c.rope_theta, 150000);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.LayerIsSliding(l), l % 2 == 0);
}

TEST(FamilyConfig, GatedDeltaNetHybrids) {
  for (const char* name : {"qwen3-next", "qwen3-5-text", "qwen3-5-moe-text"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = Arch(name);
    EXPECT_EQ(c.layer_types, (std::vector<std::string>{"linear_attention", "linear_attention",
                                                       "linear_attention", "full_attention"}));
    EXPECT_EQ(c.delta_net.num_key_heads, 2);
    EXPECT_EQ(c.delta_net.num_value_heads, 4);
    EXPECT_EQ(c.delta_net.key_head_dim, 32);
    EXPECT_EQ(c.delta_net.value_head_dim, 32);
    EXPECT_EQ(c.delta_net.conv_kernel, 4);
    EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.is_moe(), std::string(name) != "qwen3-5-text");
    if (c.is_moe()) {
      EXPECT_EQ(c.shared_expert_intermediate_size, 128);
      EXPECT_TRUE(c.norm_topk_prob);
    }
  }
  json j = ArchJson("qwen3-next");
  j["linear_num_value_heads"] = 3;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'linear_num_value_heads'"));
  j = ArchJson("qwen3-next");
  j["layer_types"][0] = "mamba";
  EXPECT_THAT(ErrorOf(j), HasSubstr("unsupported layer type \"mamba\""));
  j.erase("layer_types");
  j["full_attention_interval"] = 2;
  EXPECT_EQ(P(j).layer_types, (std::vector<std::string>{"linear_attention", "full_attention",
                                                        "linear_attention", "full_attention"}));
}

TEST(FamilyConfig, NemotronH) {
  const ModelConfig c = Arch("nemotron-h");
  EXPECT_EQ(c.layer_types, (std::vector<std::string>{"mamba", "mlp", "full_attention", "mlp"}));
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);  // layer_norm_epsilon
  EXPECT_EQ(c.hidden_act, "relu2");        // mlp_hidden_act
  EXPECT_EQ(c.mamba.num_heads, 8);
  EXPECT_EQ(c.mamba.head_dim, 16);
  EXPECT_EQ(c.mamba.state_size, 16);
  EXPECT_EQ(c.mamba.n_groups, 2);
  EXPECT_EQ(c.mamba.conv_kernel, 4);
  EXPECT_EQ(c.mamba.chunk_size, 16);
  EXPECT_TRUE(c.mamba.conv_bias);
  EXPECT_FALSE(c.mamba.proj_bias);
  EXPECT_DOUBLE_EQ(c.mamba.time_step_min_clamp, 0.0);
  EXPECT_TRUE(std::isinf(c.mamba.time_step_max_clamp));
  for (int l = 0; l < 4; ++l) EXPECT_FALSE(c.LayerIsMoe(l));

  json j = ArchJson("nemotron-h");
  j.erase("layers_block_type");
  j["hybrid_override_pattern"] = "M-*E";
  const ModelConfig h = P(j);
  EXPECT_EQ(h.layer_types, (std::vector<std::string>{"mamba", "mlp", "full_attention", "moe"}));
  EXPECT_TRUE(h.LayerIsMoe(3));
  EXPECT_FALSE(h.LayerIsMoe(0));
  j["hybrid_override_pattern"] = "M-*";
  j["num_hidden_layers"] = 4;
  EXPECT_THAT(ErrorOf(j), HasSubstr("3 entries for num_hidden_layers 4"));
  j["hybrid_override_pattern"] = "M-*X";  // num_hidden_layers still 4
  EXPECT_THAT(ErrorOf(j), HasSubstr("unsupported symbol 'X'"));
  j.erase("hybrid_override_pattern");
  EXPECT_THAT(ErrorOf(j), HasSubstr("'layers_block_type': required"));
  j = ArchJson("nemotron-h");
  j["time_step_limit"] = {0.1, 0.01};
  EXPECT_THAT(ErrorOf(j), HasSubstr("'time_step_limit'"));
  j["time_step_limit"] = {0.0, "big"};
  EXPECT_THAT(ErrorOf(j), HasSubstr("'time_step_limit'"));
  j = ArchJson("nemotron-h");
  j["num_hidden_layers"] = 5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("4 entries for num_hidden_layers 5"));
  j = ArchJson("nemotron-h");
  j["layers_block_type"][3] = "moe";
  j.erase("n_routed_experts");
  EXPECT_THAT(ErrorOf(j), HasSubstr("'n_routed_experts': required by the 'moe' layers"));
  j["layers_block_type"][3] = "mlp";
  EXPECT_FALSE(P(j).is_moe());  // a dense hybrid
  j = ArchJson("nemotron-h");
  j["n_groups"] = 3;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'n_groups'"));
}

TEST(FamilyConfig, DeepseekMlaAndRouting) {
  const ModelConfig v2 = Arch("deepseek-v2");
  EXPECT_EQ(v2.mla.q_lora_rank, 64);
  EXPECT_EQ(v2.mla.kv_lora_rank, 32);
  EXPECT_EQ(v2.mla.qk_nope_head_dim, 32);
  EXPECT_EQ(v2.mla.qk_rope_head_dim, 16);
  EXPECT_EQ(v2.mla.v_head_dim, 32);
  EXPECT_EQ(v2.head_dim, 48);
  EXPECT_EQ(v2.scoring_func, "softmax");
  EXPECT_FALSE(v2.norm_topk_prob);
  EXPECT_EQ(v2.n_shared_experts, 1);
  EXPECT_EQ(v2.first_k_dense_replace, 1);
  EXPECT_EQ(v2.n_group, 1);  // greedy: no groups
  EXPECT_FALSE(v2.LayerIsMoe(0));
  for (int l = 1; l < 4; ++l) EXPECT_TRUE(v2.LayerIsMoe(l));

  const ModelConfig v3 = Arch("deepseek-v3");
  EXPECT_EQ(v3.scoring_func, "sigmoid");
  EXPECT_TRUE(v3.norm_topk_prob);
  EXPECT_EQ(v3.n_group, 2);
  EXPECT_EQ(v3.topk_group, 1);
  EXPECT_DOUBLE_EQ(v3.routed_scaling_factor, 2.5);
  EXPECT_TRUE(v3.mla.rope_interleave);

  json j = ArchJson("deepseek-v2");
  j["q_lora_rank"] = nullptr;  // DeepSeek-V2-Lite
  EXPECT_EQ(P(j).mla.q_lora_rank, 0);
  j = ArchJson("deepseek-v3");
  j["n_group"] = 3;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'n_group'"));
  j = ArchJson("deepseek-v3");
  j["topk_group"] = 4;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'topk_group'"));
  j = ArchJson("deepseek-v3");
  j["topk_method"] = "random";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'topk_method'"));
  j = ArchJson("deepseek-v2");
  j.erase("kv_lora_rank");
  EXPECT_THAT(ErrorOf(j), HasSubstr("'kv_lora_rank': required"));
  j = ArchJson("deepseek-v2");
  j["qk_rope_head_dim"] = 15;
  EXPECT_THAT(ErrorOf(j), HasSubstr("must be even"));
}

TEST(FamilyConfig, MultimodalWrapper) {
  // Gemma 3 / Qwen3.5 as published: the text model nested in text_config.
  json outer = {{"model_type", "gemma3"},
                {"architectures", {"Gemma3ForConditionalGeneration"}},
                {"text_config", ArchJson("gemma3-text")},
                {"vision_config", {{"hidden_size", 1152}}},
                {"eos_token_id", {1, 106}}};
  outer["text_config"].erase("eos_token_id");
  const ModelConfig c = P(outer);
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.wrapper_model_type, "gemma3");
  EXPECT_EQ(c.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 106}));
  ASSERT_TRUE(c.sliding_rope.has_value());

  // A text_config without model_type takes the wrapper's text model.
  json q = {{"model_type", "qwen3_5"}, {"text_config", ArchJson("qwen3-5-text")}};
  q["text_config"].erase("model_type");
  EXPECT_EQ(P(q).model_type, "qwen3_5_text");
  q["model_type"] = "llava";
  EXPECT_THAT(ErrorOf(q), HasSubstr("'text_config.model_type': required"));
  q["text_config"] = 3;
  EXPECT_THAT(ErrorOf(q), HasSubstr("'text_config': expected an object"));
  q["text_config"] = ArchJson("qwen3-5-text");
  q["text_config"].erase("hidden_size");
  EXPECT_THAT(ErrorOf(q), HasSubstr("'text_config.hidden_size': required"));
}

TEST(FamilyConfig, RopeParameterErrors) {
  json j = ArchJson("gemma3-text");
  j["rope_parameters"]["chunked_attention"] = {{"rope_theta", 1.0}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("unknown layer type"));
  j = ArchJson("qwen3-next");
  j["rope_parameters"]["partial_rotary_factor"] = 1.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'rope_parameters.partial_rotary_factor': must be in (0, 1]"));
  j = ArchJson("gemma3-text");
  j["rope_parameters"]["sliding_attention"]["rope_theta"] = -1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_parameters.sliding_attention.rope_theta"));
  j = ArchJson("gemma2");
  j["attn_logit_softcapping"] = -1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'attn_logit_softcapping'"));
  j = ArchJson("gemma2");
  j["layer_types"][1] = "linear_attention";
  EXPECT_THAT(ErrorOf(j), HasSubstr("unsupported layer type"));
}

}  // namespace
}  // namespace tq
