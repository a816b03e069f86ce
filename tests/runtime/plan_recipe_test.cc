// The quantization recipe (model/quant_recipe.h) and tensor roles (model/tensor_roles.h) on the
// shared checkpoints' headers.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/quant_recipe.h"
#include "model/tensor_roles.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using quant::CodeFormat;

struct Loaded {
  ModelConfig config;
  std::vector<TensorInfo> tensors;
};

Loaded Load(const std::string& name) {
  const std::string dir = test::ModelDir(name);
  return {LoadModelConfig(dir), Checkpoint::ReadHeaders(dir)};
}

const TensorDecision& Find(const QuantRecipe& r, const std::string& name) {
  for (const auto& d : r.tensors)
    if (d.name == name) return d;
  throw Error("test", "no tensor " + name);
}

TEST(PlanRecipe, ParseLayerRanges) {
  EXPECT_EQ(ParseLayerRanges("0-1,22-23", 24), (std::vector<int64_t>{0, 1, 22, 23}));
  EXPECT_EQ(ParseLayerRanges("5", 24), (std::vector<int64_t>{5}));
  EXPECT_EQ(ParseLayerRanges(" 3 - 4 , 1,3", 24), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_TRUE(ParseLayerRanges("", 24).empty());
  for (const char* bad : {"a", "3-1", "0-24", "1,,2", "-1", "1-", "1-2-3", ",", "1.5", "24"}) {
    try {
      ParseLayerRanges(bad, 24);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--protect-layers"), std::string::npos) << e.what();
    }
  }
  try {
    ParseLayerRanges("0-30", 24);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("layers 0-23"), std::string::npos) << e.what();
  }
}

TEST(PlanRecipe, ChooseGroup) {
  auto g = ChooseGroup(1408, 64, RotationKind::kHadamard);
  EXPECT_TRUE(g.quantizable);
  EXPECT_EQ(g.group_size, 64);
  EXPECT_EQ(g.rotation_block, 128);
  EXPECT_TRUE(g.note.empty());
  g = ChooseGroup(14336, 128, RotationKind::kHadamard);
  EXPECT_EQ(g.rotation_block, 2048);
  EXPECT_EQ(g.group_size, 128);
  g = ChooseGroup(8192, 64, RotationKind::kHadamard);
  EXPECT_EQ(g.rotation_block, 4096);  // capped at the largest block
  // 96 = 3 * 32: the block is 32, so the group shrinks to 32.
  g = ChooseGroup(96, 64, RotationKind::kHadamard);
  EXPECT_TRUE(g.quantizable);
  EXPECT_EQ(g.group_size, 32);
  EXPECT_EQ(g.rotation_block, 32);
  EXPECT_NE(g.note.find("group 32"), std::string::npos);
  // 48: block 16 < 32 and no group >= 32 divides it: kept.
  g = ChooseGroup(48, 32, RotationKind::kHadamard);
  EXPECT_FALSE(g.quantizable);
  EXPECT_NE(g.note.find("kept"), std::string::npos);
  // Without rotation, the largest of 128, 64, 32 dividing `in`.
  g = ChooseGroup(96, 128, RotationKind::kNone);
  EXPECT_EQ(g.group_size, 32);
  EXPECT_EQ(g.rotation_block, 0);
  g = ChooseGroup(1408, 128, RotationKind::kNone);
  EXPECT_EQ(g.group_size, 128);
  EXPECT_TRUE(g.note.empty());
}

TEST(PlanRecipe, TensorBytes) {
  // q4: 2 codes per byte; g64: one fp16 scale per 64; 16 fp32 levels.
  EXPECT_EQ(QuantizedTensorBytes(512, 512, CodeFormat::kQ4, 64, quant::QuantMethod::kCodebook),
            512 * 256 + 512 * 8 * 2 + 16 * 4);
  // q3 dense: 32 codes in 12 bytes; affine adds fp16 minimums and has no codebook.
  EXPECT_EQ(QuantizedTensorBytes(10, 1408, CodeFormat::kQ3, 32, quant::QuantMethod::kAffine),
            10 * (1408 / 32 * 12) + 10 * 44 * 4);
  // Ternary: exactly ceil(n / 5) bytes per row.
  EXPECT_EQ(QuantizedTensorBytes(4, 96, CodeFormat::kTernary, 32, quant::QuantMethod::kCodebook),
            4 * 20 + 4 * 3 * 2 + 3 * 4);
  EXPECT_EQ(SignBytes(1408), 176);
  EXPECT_EQ(SignBytes(9), 2);
}

TEST(PlanRecipe, RolesOfSharedModels) {
  const Loaded llama = Load("tq-llama-21m");
  const TensorRoleMap roles(llama.config);
  std::map<TensorRole, int> count;
  for (const auto& t : llama.tensors) {
    const auto e = roles.Classify(t.name);
    ASSERT_TRUE(e) << t.name;
    EXPECT_EQ(e->shape, t.shape) << t.name;
    ++count[e->role];
  }
  EXPECT_EQ(count[TensorRole::kAttnQ], 6);
  EXPECT_EQ(count[TensorRole::kMlpDown], 6);
  EXPECT_EQ(count[TensorRole::kNorm], 13);
  EXPECT_EQ(count[TensorRole::kEmbed], 1);
  EXPECT_EQ(count[TensorRole::kLmHead], 0);  // tied
  // Names under a linear's prefix (what a converted checkpoint stores) keep the linear's role.
  const auto codes = roles.Classify("model.layers.2.mlp.up_proj.codes");
  ASSERT_TRUE(codes);
  EXPECT_EQ(codes->role, TensorRole::kMlpUp);
  EXPECT_EQ(codes->layer, 2);
  EXPECT_FALSE(roles.Classify("model.layers.2.self_attn.rotary_emb.inv_freq"));
  EXPECT_FALSE(roles.Classify("model.layers.9.mlp.up_proj.weight"));  // no layer 9

  const Loaded moe = Load("tq-qwen3moe-17m");
  const TensorRoleMap moe_roles(moe.config);
  std::map<TensorRole, int> mc;
  for (const auto& t : moe.tensors) {
    const auto e = moe_roles.Classify(t.name);
    ASSERT_TRUE(e) << t.name;
    EXPECT_EQ(e->shape, t.shape) << t.name;
    ++mc[e->role];
  }
  EXPECT_EQ(mc[TensorRole::kExpertGate], 6 * 32);
  EXPECT_EQ(mc[TensorRole::kRouter], 6);
  EXPECT_EQ(mc[TensorRole::kNorm], 1 + 6 * 4);  // final + attn/ffn/q/k norms
  EXPECT_EQ(mc[TensorRole::kMlpGate], 0);
  const auto e7 = moe_roles.Classify("model.layers.1.mlp.experts.7.down_proj.weight");
  ASSERT_TRUE(e7);
  EXPECT_EQ(e7->expert, 7);
  EXPECT_EQ(e7->role, TensorRole::kExpertDown);
}

TEST(PlanRecipe, DefaultRecipeOnLlama) {
  const Loaded m = Load("tq-llama-21m");
  QuantRecipeOptions o;  // 4 bits, group 64, hadamard, embeddings kept
  const QuantRecipe r = PlanQuantization(m.config, m.tensors, o);
  ASSERT_EQ(r.tensors.size(), m.tensors.size());
  const auto& q = Find(r, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_TRUE(q.quantize);
  EXPECT_EQ(q.format, CodeFormat::kQ4);
  EXPECT_EQ(q.bits, 4.0);
  EXPECT_EQ(q.group_size, 64);
  EXPECT_EQ(q.rotation_block, 512);
  EXPECT_EQ(q.role, TensorRole::kAttnQ);
  EXPECT_EQ(q.layer, 0);
  // q, k and v share one sign vector ([512] -> 64 bytes), counted once.
  const auto& k = Find(r, "model.layers.0.self_attn.k_proj.weight");
  const auto& v = Find(r, "model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(k.rotation_group, q.rotation_group);
  EXPECT_EQ(v.rotation_group, q.rotation_group);
  const int64_t q_mat = 512 * 256 + 512 * 8 * 2 + 64, kv_mat = 128 * 256 + 128 * 8 * 2 + 64;
  EXPECT_EQ(q.projected_bytes + k.projected_bytes + v.projected_bytes, q_mat + 2 * kv_mat + 64);
  const auto& down = Find(r, "model.layers.5.mlp.down_proj.weight");
  EXPECT_EQ(down.rotation_block, 128);  // in = 1408 = 11 * 128
  EXPECT_EQ(down.projected_bytes, 512 * 704 + 512 * 22 * 2 + 64 + 176);
  const auto& embed = Find(r, "model.embed_tokens.weight");
  EXPECT_FALSE(embed.quantize);
  EXPECT_EQ(embed.projected_bytes, embed.source_bytes);
  EXPECT_FALSE(Find(r, "model.norm.weight").quantize);
  EXPECT_TRUE(r.notes.empty());
  // Linears at ~4.25 bits of 16: the model shrinks, the embedding (8192 x 512 bf16) stays.
  const int64_t embed_bytes = 8192 * 512 * 2;
  const double linear_ratio =
      double(r.projected_bytes - embed_bytes) / double(r.source_bytes - embed_bytes);
  EXPECT_GT(linear_ratio, 4.25 / 16 - 0.01);
  EXPECT_LT(linear_ratio, 4.40 / 16);
}

TEST(PlanRecipe, OverridesOnMoe) {
  const Loaded m = Load("tq-qwen3moe-17m");
  QuantRecipeOptions o;
  o.bits = 3;
  o.attn_bits = 4;
  o.ternary_experts = true;
  o.expert_down_bits = 2;
  o.protect_layers = "0,5";
  o.protect_bits = 16;
  o.embed_bits = 8;
  const QuantRecipe r = PlanQuantization(m.config, m.tensors, o);
  EXPECT_EQ(r.protected_layers, (std::vector<int64_t>{0, 5}));
  EXPECT_FALSE(Find(r, "model.layers.0.self_attn.q_proj.weight").quantize);
  EXPECT_FALSE(Find(r, "model.layers.5.mlp.experts.3.up_proj.weight").quantize);
  EXPECT_EQ(Find(r, "model.layers.1.self_attn.o_proj.weight").format, CodeFormat::kQ4);
  const auto& gate = Find(r, "model.layers.1.mlp.experts.3.gate_proj.weight");
  EXPECT_EQ(gate.format, CodeFormat::kTernary);
  EXPECT_DOUBLE_EQ(gate.bits, 1.6);
  EXPECT_EQ(gate.rotation_block, 256);
  EXPECT_EQ(gate.rotation_group, "model.layers.1/experts_in");
  // Expert down: in = 96 -> Hadamard block 32, group 64 -> 32.
  const auto& down = Find(r, "model.layers.1.mlp.experts.3.down_proj.weight");
  EXPECT_EQ(down.format, CodeFormat::kQ2);
  EXPECT_EQ(down.group_size, 32);
  EXPECT_EQ(down.rotation_block, 32);
  EXPECT_FALSE(down.note.empty());
  EXPECT_EQ(r.notes.size(), 1u) << r.notes.front();
  EXPECT_FALSE(Find(r, "model.layers.1.mlp.gate.weight").quantize);  // router
  EXPECT_FALSE(Find(r, "model.layers.1.self_attn.q_norm.weight").quantize);
  const auto& embed = Find(r, "model.embed_tokens.weight");
  EXPECT_EQ(embed.format, CodeFormat::kQ8);
  EXPECT_EQ(embed.rotation_block, 0);  // a lookup table is never rotated
  EXPECT_EQ(embed.projected_bytes, 8192 * 256 + 8192 * 4 * 2 + 256 * 4);
  // Expert bytes: the only ones counted in projected_expert_bytes.
  int64_t experts = 0;
  for (const auto& d : r.tensors)
    if (IsExpert(d.role)) experts += d.projected_bytes;
  EXPECT_EQ(r.projected_expert_bytes, experts);
  EXPECT_GT(experts, 0);
}

TEST(PlanRecipe, AffineAndNoRotation) {
  const Loaded m = Load("tq-llama-21m");
  QuantRecipeOptions o;
  o.method = quant::QuantMethod::kAffine;
  o.rotation = RotationKind::kNone;
  o.group_size = 128;
  const QuantRecipe r = PlanQuantization(m.config, m.tensors, o);
  const auto& down = Find(r, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(down.rotation_block, 0);
  EXPECT_TRUE(down.rotation_group.empty());
  EXPECT_EQ(down.projected_bytes, 512 * 704 + 512 * 11 * 4);  // codes + fp16 scale and minimum
}

TEST(PlanRecipe, BadOptions) {
  const Loaded m = Load("tq-llama-21m");
  auto expect_usage = [&](QuantRecipeOptions o, const std::string& needle) {
    try {
      PlanQuantization(m.config, m.tensors, o);
      ADD_FAILURE() << "accepted options (" << needle << ")";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  QuantRecipeOptions o;
  o.bits = 5;
  expect_usage(o, "--bits 5");
  o = {};
  o.group_size = 48;
  expect_usage(o, "--group-size 48");
  o = {};
  o.embed_bits = 6;
  expect_usage(o, "6-bit");
  o = {};
  o.ternary_experts = true;
  o.method = quant::QuantMethod::kAffine;
  expect_usage(o, "--ternary-experts");
  o = {};
  o.protect_layers = "4-9";
  expect_usage(o, "--protect-layers");
  o = {};
  o.protect_bits = 1;
  expect_usage(o, "--protect-bits");
  EXPECT_EQ(ParseRotationKind("hadamard"), RotationKind::kHadamard);
  EXPECT_FALSE(ParseRotationKind("givens"));
}

TEST(PlanRecipe, UnknownModelTypeAndTensors) {
  Loaded m = Load("tq-llama-21m");
  // Unknown names and non-float tensors are kept, never quantized.
  m.tensors.push_back({"extra.thing", DType::BF16, {64, 64}, 0, 64 * 64 * 2, 0});
  m.tensors.push_back({"model.layers.0.mlp.up_proj.weight_int", DType::I32, {4}, 0, 16, 0});
  const QuantRecipe r = PlanQuantization(m.config, m.tensors, {});
  EXPECT_EQ(Find(r, "extra.thing").role, TensorRole::kOther);
  EXPECT_FALSE(Find(r, "extra.thing").quantize);
  EXPECT_FALSE(Find(r, "model.layers.0.mlp.up_proj.weight_int").quantize);
  m.config.model_type = "gpt_neox";
  EXPECT_THROW(PlanQuantization(m.config, m.tensors, {}), Error);
}

}  // namespace
}  // namespace tq
