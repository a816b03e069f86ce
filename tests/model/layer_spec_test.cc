// The layer spec of every family checkpoint in ../shared/models (the twelve arch/ ones and the
// runnable ones): its structure per layer, and the tensors it implies (ExpectedTensors) equal the
// checkpoint's tensors exactly — names and shapes, nothing missing, nothing extra.
#include "model/layer_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/architecture.h"
#include "model/tensor_roles.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using ::testing::HasSubstr;

struct Loaded {
  ModelConfig config;
  ModelSpec spec;
};
Loaded Load(const std::string& dir) {
  Loaded l;
  l.config = LoadModelConfig(dir);
  l.spec = BuildModelSpec(l.config, FindFamily(l.config.model_type));
  return l;
}
Loaded Arch(const std::string& name) { return Load(test::ModelDir("arch/tq-arch-" + name)); }

const char* kArchDirs[] = {"gemma2",           "gemma3-text", "gemma4-text", "phi3",
                           "qwen2-moe",        "gpt-oss",     "qwen3-next",  "qwen3-5-text",
                           "qwen3-5-moe-text", "nemotron-h",  "deepseek-v2", "deepseek-v3"};

// The spec's tensors against the checkpoint's header: same names, same shapes.
void ExpectTensorsMatch(const std::string& dir) {
  SCOPED_TRACE(dir);
  const ModelConfig c = LoadModelConfig(dir);
  const Architecture& arch = FindFamily(c.model_type);
  std::map<std::string, Shape> have;
  for (const TensorInfo& t : Checkpoint::ReadHeaders(dir)) have[t.name] = t.shape;
  std::map<std::string, Shape> want;
  for (const ExpectedTensor& e : ExpectedTensors(c, arch)) {
    EXPECT_TRUE(want.emplace(e.name, e.shape).second) << "listed twice: " << e.name;
    if (!e.required && !have.count(e.name)) want.erase(e.name);
  }
  for (const auto& [name, shape] : want) {
    auto it = have.find(name);
    if (it == have.end()) {
      ADD_FAILURE() << "expected but absent: " << name;
      continue;
    }
    EXPECT_EQ(ShapeToString(it->second), ShapeToString(shape)) << name;
  }
  for (const auto& [name, shape] : have)
    EXPECT_TRUE(want.count(name)) << "in the checkpoint but not in the spec: " << name;
}

TEST(LayerSpec, EveryCheckpointsTensorsFollowFromTheSpec) {
  for (const char* d : kArchDirs)
    ExpectTensorsMatch(test::ModelDir(std::string("arch/tq-arch-") + d));
  ExpectTensorsMatch(test::ModelDir("tq-llama-21m"));
  ExpectTensorsMatch(test::ModelDir("tq-qwen3moe-17m"));
}

TEST(LayerSpec, Gemma2) {
  const ModelSpec s = Arch("gemma2").spec;
  EXPECT_TRUE(s.norm_plus_one);
  EXPECT_FLOAT_EQ(s.embed_scale, std::sqrt(128.0f));
  EXPECT_FLOAT_EQ(s.final_logit_softcap, 30);
  ASSERT_EQ(s.layers.size(), 4u);
  for (const LayerSpec& L : s.layers) {
    EXPECT_EQ(L.mixer, MixerKind::kAttention);
    EXPECT_TRUE(L.sandwich_norm);
    EXPECT_EQ(L.ffn.act, Activation::kGeluTanh);
    EXPECT_TRUE(L.ffn.gated());
    EXPECT_FLOAT_EQ(L.attn.scale, 1.0f / std::sqrt(32.0f));  // query_pre_attn_scalar
    EXPECT_FLOAT_EQ(L.attn.logit_softcap, 50);
    EXPECT_EQ(L.attn.window, L.index % 2 == 0 ? 8 : 0);
    EXPECT_EQ(L.attn.kv_compressible, L.index % 2 == 1);
    EXPECT_EQ(L.attn.rope.rotary_dim, 32);
    EXPECT_DOUBLE_EQ(L.attn.rope.theta, 1e4);
  }
}

TEST(LayerSpec, Gemma3LocalGlobalRope) {
  const ModelSpec s = Arch("gemma3-text").spec;
  for (const LayerSpec& L : s.layers) {
    EXPECT_TRUE(L.attn.qk_norm);
    EXPECT_FLOAT_EQ(L.attn.logit_softcap, 0);
    EXPECT_DOUBLE_EQ(L.attn.rope.theta, L.index % 2 == 0 ? 1e4 : 1e6) << L.index;
  }
  EXPECT_FLOAT_EQ(s.final_logit_softcap, 0);
}

TEST(LayerSpec, Gemma4PerLayerShapes) {
  const ModelSpec s = Arch("gemma4-text").spec;
  EXPECT_EQ(s.per_layer_input_dim, 16);
  for (const LayerSpec& L : s.layers) {
    const bool global = L.index % 2 == 1;
    EXPECT_EQ(L.attn.head_dim, global ? 512 : 32);
    EXPECT_EQ(L.attn.rope.rotary_dim, global ? 128 : 32);  // proportional 0.25 on global
    EXPECT_EQ(L.attn.rope.freq_dim, global ? 512 : 32);
    EXPECT_FLOAT_EQ(L.attn.scale, 1.0f);
    EXPECT_TRUE(L.per_layer_input);
  }
}

TEST(LayerSpec, Phi3Fused) {
  const ModelSpec s = Arch("phi3").spec;
  EXPECT_TRUE(s.layers[0].attn.fused_qkv);
  EXPECT_TRUE(s.layers[0].ffn.fused_gate_up);
  EXPECT_EQ(s.layers[0].attn.window, 0);
}

TEST(LayerSpec, Qwen2MoeSharedExpert) {
  const ModelSpec s = Arch("qwen2-moe").spec;
  for (const LayerSpec& L : s.layers) {
    ASSERT_EQ(L.ffn.kind, FfnKind::kMoe);
    EXPECT_EQ(L.ffn.moe.router, Router::kSoftmaxTopK);
    EXPECT_FALSE(L.ffn.moe.renormalize);
    EXPECT_EQ(L.ffn.moe.shared_ffn, 128);
    EXPECT_TRUE(L.ffn.moe.shared_gate);
    EXPECT_TRUE(L.attn.qkv_bias);
    EXPECT_FALSE(L.attn.o_bias);
  }
}

TEST(LayerSpec, GptOss) {
  const ModelSpec s = Arch("gpt-oss").spec;
  for (const LayerSpec& L : s.layers) {
    EXPECT_TRUE(L.attn.sinks);
    EXPECT_TRUE(L.attn.qkv_bias && L.attn.o_bias);
    EXPECT_EQ(L.attn.window, L.index % 2 == 0 ? 8 : 0);
    EXPECT_EQ(L.attn.rope.scaling.type, RopeScaling::Type::kYarn);
    ASSERT_EQ(L.ffn.kind, FfnKind::kMoe);
    EXPECT_EQ(L.ffn.act, Activation::kClampedSwiglu);
    EXPECT_EQ(L.ffn.moe.router, Router::kTopKSoftmax);
    EXPECT_TRUE(L.ffn.moe.router_bias && L.ffn.moe.expert_bias && L.ffn.moe.fused_experts);
    EXPECT_EQ(L.ffn.moe.shared_ffn, 0);
  }
}

TEST(LayerSpec, DeltaNetHybrids) {
  for (const char* name : {"qwen3-next", "qwen3-5-text", "qwen3-5-moe-text"}) {
    SCOPED_TRACE(name);
    const ModelSpec s = Arch(name).spec;
    EXPECT_TRUE(s.norm_plus_one);
    EXPECT_TRUE(s.HasRecurrentLayers());
    EXPECT_EQ(s.CountMixer(MixerKind::kGatedDeltaNet), 3);
    const LayerSpec& d = s.layers[0];
    EXPECT_EQ(d.delta.ConvDim(), 256);
    EXPECT_EQ(d.delta.fused_in_proj, std::string(name) == "qwen3-next");
    EXPECT_EQ(d.RecurrentStateFloats(), 256 * 3 + 4 * 32 * 32);
    const LayerSpec& a = s.layers[3];
    ASSERT_EQ(a.mixer, MixerKind::kAttention);
    EXPECT_TRUE(a.attn.output_gate);
    EXPECT_TRUE(a.attn.qk_norm);
    EXPECT_EQ(a.attn.rope.rotary_dim, 16);  // 0.25 × 64
    EXPECT_EQ(a.RecurrentStateFloats(), 0);
    if (std::string(name) != "qwen3-5-text") {
      EXPECT_EQ(a.ffn.kind, FfnKind::kMoe);
      EXPECT_TRUE(a.ffn.moe.shared_gate);
      EXPECT_TRUE(a.ffn.moe.renormalize);
    } else {
      EXPECT_EQ(a.ffn.kind, FfnKind::kDense);
    }
  }
}

TEST(LayerSpec, NemotronHOneBlockPerLayer) {
  const ModelSpec s = Arch("nemotron-h").spec;
  ASSERT_EQ(s.layers.size(), 4u);
  EXPECT_EQ(s.layers[0].mixer, MixerKind::kMamba2);
  EXPECT_EQ(s.layers[0].ffn.kind, FfnKind::kNone);
  EXPECT_EQ(s.layers[0].mamba.InProjRows(), 328);
  EXPECT_EQ(s.layers[0].mamba.ConvDim(), 192);
  EXPECT_EQ(s.layers[1].mixer, MixerKind::kNone);
  EXPECT_EQ(s.layers[1].ffn.kind, FfnKind::kDense);
  EXPECT_EQ(s.layers[1].ffn.act, Activation::kRelu2);
  EXPECT_FALSE(s.layers[1].ffn.gated());
  EXPECT_EQ(s.layers[2].mixer, MixerKind::kAttention);
  EXPECT_EQ(s.layers[2].ffn.kind, FfnKind::kNone);
  EXPECT_EQ(s.layers[2].attn.rope.rotary_dim, 0);  // no positions in nemotron attention
  EXPECT_FLOAT_EQ(s.norm_eps, 1e-5f);
}

TEST(LayerSpec, DeepseekMla) {
  const ModelSpec v2 = Arch("deepseek-v2").spec;
  EXPECT_EQ(v2.layers[0].ffn.kind, FfnKind::kDense);
  for (const LayerSpec& L : v2.layers) {
    EXPECT_EQ(L.mixer, MixerKind::kMla);
    EXPECT_EQ(L.mla.LatentWidth(), 48);
    EXPECT_FALSE(L.attn.kv_compressible);
    EXPECT_TRUE(L.attn.rope.interleaved);
    EXPECT_EQ(L.attn.rope.rotary_dim, 16);
    EXPECT_FLOAT_EQ(L.attn.scale, 1.0f / std::sqrt(48.0f));
  }
  EXPECT_EQ(v2.layers[1].ffn.moe.router, Router::kSoftmaxTopK);
  EXPECT_EQ(v2.layers[1].ffn.moe.shared_ffn, 64);
  EXPECT_FALSE(v2.layers[1].ffn.moe.shared_gate);
  const ModelSpec v3 = Arch("deepseek-v3").spec;
  const MoeSpec& m = v3.layers[2].ffn.moe;
  EXPECT_EQ(m.router, Router::kSigmoidGroupTopK);
  EXPECT_TRUE(m.correction_bias);
  EXPECT_TRUE(m.renormalize);
  EXPECT_EQ(m.n_group, 2);
  EXPECT_EQ(m.topk_group, 1);
  EXPECT_FLOAT_EQ(m.routed_scale, 2.5f);
}

TEST(LayerSpec, MlaYarnScale) {
  ModelConfig c = Arch("deepseek-v2").config;
  c.rope_scaling.type = RopeScaling::Type::kYarn;
  c.rope_scaling.factor = 40;
  c.rope_scaling.mscale_all_dim = 0.707;
  const float m = float(0.1 * 0.707 * std::log(40.0) + 1.0);
  EXPECT_NEAR(BuildModelSpec(c).layers[0].attn.scale, m * m / std::sqrt(48.0f), 1e-6);
}

TEST(LayerSpec, RunnableFamiliesKeepTheirStructure) {
  const Loaded l = Load(test::ModelDir("tq-qwen3moe-17m"));
  for (const LayerSpec& L : l.spec.layers) {
    EXPECT_EQ(L.mixer, MixerKind::kAttention);
    EXPECT_EQ(L.ffn.kind, FfnKind::kMoe);
    EXPECT_TRUE(L.attn.qk_norm);
    EXPECT_TRUE(L.attn.kv_compressible);
    EXPECT_EQ(L.attn.rope.rotary_dim, L.attn.head_dim);
  }
  EXPECT_FALSE(l.spec.norm_plus_one);
  EXPECT_FLOAT_EQ(l.spec.embed_scale, 1.0f);
}

TEST(LayerSpec, Errors) {
  ModelConfig c = Arch("phi3").config;
  c.hidden_act = "gelu_erf_fancy";
  try {
    BuildModelSpec(c);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[layer spec] phi3: unsupported activation 'gelu_erf_fancy'"));
  }
  c = Arch("phi3").config;
  c.partial_rotary_factor = 0.01;
  try {
    BuildModelSpec(c);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("leaves no rotary pair"));
  }
  // Every registered family runs (FindArchitecture refuses runnable = false ones by name).
  EXPECT_EQ(ArchitectureNames().size(), FamilyNames().size());
  EXPECT_EQ(FindArchitecture("gemma4_text").model_type, "gemma4_text");
  EXPECT_THROW(FindFamily("gpt2"), Error);
  EXPECT_EQ(FamilyNames().size(), 18u);
}

}  // namespace
}  // namespace tq
