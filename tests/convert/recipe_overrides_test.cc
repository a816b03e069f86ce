// Per-tensor bit overrides (--tensor-bits) and the largest rotation block (--max-rotation-block)
// of the quantization recipe, on tq-llama-21m's headers.
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/quant_recipe.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

QuantRecipe PlanLlama(const QuantRecipeOptions& o) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  return PlanQuantization(LoadModelConfig(dir), Checkpoint::ReadHeaders(dir), o);
}

const TensorDecision& Find(const QuantRecipe& r, const std::string& name) {
  for (const auto& d : r.tensors)
    if (d.name == name) return d;
  throw Error("test", "no tensor " + name);
}

TEST(RecipeOverrides, ParseTensorBits) {
  using V = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(ParseTensorBits("down_proj=8, layers.0.=16"), (V{{"down_proj", 8}, {"layers.0.", 16}}));
  EXPECT_TRUE(ParseTensorBits("").empty());
  EXPECT_TRUE(ParseTensorBits("  ").empty());
  for (const char* bad : {"down_proj", "=4", "down_proj=5", "down_proj=", "a=4,,b=3", "a=4,",
                          "x=-2", "x=4b", "x=1"}) {
    try {
      ParseTensorBits(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--tensor-bits"), std::string::npos) << e.what();
    }
  }
}

TEST(RecipeOverrides, TensorBitsOverrideTheRoleBitsLastMatchWins) {
  QuantRecipeOptions o;
  o.bits = 3;
  o.tensor_bits = "v_proj=8,layers.0.=16,layers.0.mlp.down_proj=4";
  const QuantRecipe r = PlanLlama(o);
  EXPECT_EQ(Find(r, "model.layers.2.self_attn.v_proj.weight").format, quant::CodeFormat::kQ8);
  EXPECT_EQ(Find(r, "model.layers.2.self_attn.q_proj.weight").format, quant::CodeFormat::kQ3);
  EXPECT_FALSE(Find(r, "model.layers.0.self_attn.v_proj.weight").quantize);  // 16 = kept
  EXPECT_FALSE(Find(r, "model.layers.0.mlp.up_proj.weight").quantize);
  EXPECT_EQ(Find(r, "model.layers.0.mlp.down_proj.weight").format, quant::CodeFormat::kQ4);
  // Only decoder linears: the embedding follows --embed-bits whatever the overrides say.
  o.tensor_bits = "embed_tokens=4";
  EXPECT_FALSE(Find(PlanLlama(o), "model.embed_tokens.weight").quantize);
  o.tensor_bits = "v_proj=7";
  EXPECT_THROW(PlanLlama(o), UsageError);
}

TEST(RecipeOverrides, MaxRotationBlockCapsTheHadamardBlock) {
  QuantRecipeOptions o;
  o.group_size = 64;
  EXPECT_EQ(Find(PlanLlama(o), "model.layers.1.self_attn.q_proj.weight").rotation_block, 512);
  o.max_hadamard_block = 64;
  const QuantRecipe r = PlanLlama(o);
  EXPECT_EQ(Find(r, "model.layers.1.self_attn.q_proj.weight").rotation_block, 64);
  EXPECT_EQ(Find(r, "model.layers.1.mlp.down_proj.weight").rotation_block, 64);  // in = 1408
  o.group_size = 128;  // the group shrinks to the block
  EXPECT_EQ(Find(PlanLlama(o), "model.layers.1.self_attn.q_proj.weight").group_size, 64);
  o.max_hadamard_block = 16;
  EXPECT_THROW(PlanLlama(o), UsageError);
}

}  // namespace
}  // namespace tq
