// `convert` end to end on the shared models: the packed model computes what its explicitly
// dequantized twin computes; layout, streaming, sharding, atomicity and the budget allocator.
#include "convert/convert.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "convert_helpers.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "kernels/cpu/isa.h"
#include "model/model.h"
#include "runtime/plan/memory_plan.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using test::ModelDir;
using test::TempDir;

const char* kLlama = "tq-llama-21m";
const char* kMoe = "tq-qwen3moe-17m";

// Quantized forward == forward with the explicitly dequantized (and un-rotated) weights.
void ExpectMatchesDequantized(const ConvertOptions& base) {
  TempDir tmp;
  ConvertOptions o = base;
  o.out_dir = tmp.file("q");
  Convert(o);
  WriteDequantizedCheckpoint(o.out_dir, tmp.file("dq"));
  const std::vector<int32_t> ids = test::GoldenIds(o.model_dir);
  // With the float kernels the packed model matches to rounding.
  const kernels::cpu::Isa saved = kernels::cpu::ActiveIsa();
  kernels::cpu::SetActiveIsa(kernels::cpu::Isa::kScalar);
  EXPECT_LT(test::RelativeMaxError(test::PrefillLogits(o.out_dir, ids),
                                   test::PrefillLogits(tmp.file("dq"), ids)),
            1e-4);
  const std::vector<float> dq_decode = test::DecodeLogits(tmp.file("dq"), ids);
  EXPECT_LT(test::RelativeMaxError(test::DecodeLogits(o.out_dir, ids), dq_decode), 1e-4);
  kernels::cpu::SetActiveIsa(saved);
  // The int8 decode kernels (kernels/cpu/packed_decode.h) round activations and codebook to int8:
  // about 1% of the logit scale after all layers.
  EXPECT_LT(test::RelativeMaxError(test::DecodeLogits(o.out_dir, ids), dq_decode), 5e-2);
}

// plan --budget-bpw (o's source, recipe and budget) projects an upper bound of the weight bytes
// convert wrote to `written_dir`, and a close one (within 3%).
void ExpectPlanBoundsWhatWasWritten(const ConvertOptions& o, const std::string& written_dir) {
  PlanOptions po;
  po.model_dir = o.model_dir;
  po.recipe = o.recipe;
  po.budget_bpw = o.budget_bpw;
  po.context = 64;
  po.ram_gb = 64;
  const int64_t bound = MakeMemoryPlan(po).weights_bytes;
  po.model_dir = written_dir;
  po.recipe.reset();
  po.budget_bpw = 0;
  const int64_t written = MakeMemoryPlan(po).weights_bytes;
  EXPECT_GE(bound, written) << o.budget_bpw;
  EXPECT_LT(double(bound), 1.03 * double(written)) << o.budget_bpw;
}

TEST(Convert, LlamaQuantizedForwardEqualsDequantizedForward) {
  ExpectMatchesDequantized(test::Options(ModelDir(kLlama), "", 4));
}

TEST(Convert, LlamaAffineAndUnrotatedForwardEqualsDequantized) {
  ConvertOptions o = test::Options(ModelDir(kLlama), "", 3);
  o.recipe.method = quant::QuantMethod::kAffine;
  o.recipe.rotation = RotationKind::kNone;
  ExpectMatchesDequantized(o);
}

TEST(Convert, MoeTernaryExpertsForwardEqualsDequantized) {
  ConvertOptions o = test::Options(ModelDir(kMoe), "", 3);
  o.recipe.ternary_experts = true;
  o.recipe.embed_bits = 4;
  ExpectMatchesDequantized(o);
}

TEST(Convert, MoeTwoBitForwardEqualsDequantized) {
  ExpectMatchesDequantized(test::Options(ModelDir(kMoe), "", 2));
}

TEST(Convert, LlamaE8ScalesForwardEqualsDequantized) {
  ConvertOptions o = test::Options(ModelDir(kLlama), "", 4);
  o.recipe.scale_format = quant::ScaleFormat::kE8;
  o.recipe.group_size = 32;
  o.scale = quant::ScaleMode::kMseSearch;
  ExpectMatchesDequantized(o);
}

TEST(Convert, MoeE8ScalesGroup16ForwardEqualsDequantized) {
  ConvertOptions o = test::Options(ModelDir(kMoe), "", 3);
  o.recipe.scale_format = quant::ScaleFormat::kE8;
  o.recipe.group_size = 16;
  ExpectMatchesDequantized(o);
}

TEST(Convert, E8LayoutBitsAndConfig) {
  TempDir tmp;
  ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("e8"), 4);
  o.recipe.scale_format = quant::ScaleFormat::kE8;
  o.recipe.group_size = 32;
  const ConvertSummary s = Convert(o);
  // Codes 4 + e8 scales 8/32 + the 256-entry fp32 tables, exactly.
  double bits = 0, weights = 0;
  std::set<std::string> tables;
  const auto cfg = nlohmann::json::parse(ReadFileToString(tmp.file("e8/config.json")));
  const auto& q = cfg["quantization"];
  EXPECT_EQ(q["format_version"], 2);
  EXPECT_EQ(q["scale_format"], "e8");
  const auto tensors = test::ReadTensors(tmp.file("e8"));
  for (const auto& [name, t] : q["tensors"].items()) {
    if (name == "model.embed_tokens") {  // the embedding keeps fp16 scales
      EXPECT_EQ(t["scales"], "f16");
      EXPECT_EQ(tensors.at(name + ".scales").dtype, DType::F16);
      EXPECT_FALSE(tensors.count(name + ".scale_table"));
      continue;
    }
    EXPECT_EQ(t["scales"], "e8") << name;
    const Shape shape = t["shape"].get<Shape>();
    EXPECT_EQ(tensors.at(name + ".scales").dtype, DType::U8);
    EXPECT_EQ(tensors.at(name + ".scales").shape, (Shape{shape[0], shape[1] / 32}));
    // One table per rotation group (q/k/v share one, gate/up another).
    const std::string table = t["scale_table"].get<std::string>();
    EXPECT_EQ(tensors.at(table).shape, (Shape{256}));
    tables.insert(table);
    bits += 8.0 * double(tensors.at(name + ".codes").bytes.size() +
                         tensors.at(name + ".scales").bytes.size());
    weights += double(shape[0] * shape[1]);
  }
  EXPECT_EQ(tables.size(), 6u * 4u);  // attn_in, attn_o, mlp_in, mlp_down per layer
  EXPECT_TRUE(tables.count("model.layers.0.attn_in.scale_table"));
  bits += 8.0 * 1024 * double(tables.size());
  EXPECT_NEAR(s.linear_bits_per_weight, bits / weights, 1e-12);
  EXPECT_NEAR(q["linear_bits_per_weight"].get<double>(), bits / weights, 1e-12);
  EXPECT_GT(s.linear_bits_per_weight, 4.25);
  EXPECT_LT(s.linear_bits_per_weight, 4.30);
  // Group 16 needs e8; e8 needs the codebook method.
  o.out_dir = tmp.file("x");
  o.recipe.scale_format = quant::ScaleFormat::kF16;
  o.recipe.group_size = 16;
  EXPECT_THROW(Convert(o), UsageError);
  o.recipe.scale_format = quant::ScaleFormat::kE8;
  o.recipe.method = quant::QuantMethod::kAffine;
  EXPECT_THROW(Convert(o), UsageError);
  EXPECT_FALSE(fs::exists(tmp.file("x")));
}

TEST(Convert, E8BudgetKeepsTheAverageAndPlanBoundsIt) {
  TempDir tmp;
  ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("b"), 4);
  o.recipe.scale_format = quant::ScaleFormat::kE8;
  for (double x : {4.25, 3.5}) {
    o.budget_bpw = x;
    o.force = true;
    const ConvertSummary s = Convert(o);
    EXPECT_LE(s.linear_bits_per_weight, x + 1e-9);
    EXPECT_GT(s.linear_bits_per_weight, x - 0.05);
    const auto cfg = nlohmann::json::parse(ReadFileToString(tmp.file("b/config.json")));
    std::set<int> groups;
    for (const auto& [n, t] : cfg["quantization"]["tensors"].items())
      if (n != "model.embed_tokens") groups.insert(t["group_size"].get<int>());
    EXPECT_LT(*groups.begin(), 64) << "e8 makes small groups affordable";
    ExpectPlanBoundsWhatWasWritten(o, tmp.file("b"));
  }
}

TEST(Convert, LayoutConfigBlockAndCopiedFiles) {
  TempDir tmp;
  const ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("q"), 4);
  const ConvertSummary s = Convert(o);
  EXPECT_NEAR(s.linear_bits_per_weight, 4.25, 1e-9);  // q4 + fp16 scale per 64
  EXPECT_EQ(s.num_shards, 1);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "generation_config.json"})
    EXPECT_TRUE(fs::exists(tmp.file("q/") + f)) << f;
  EXPECT_FALSE(fs::exists(tmp.file("q/golden.safetensors")));
  const auto cfg = nlohmann::json::parse(ReadFileToString(tmp.file("q/config.json")));
  const auto& q = cfg["quantization"];
  EXPECT_EQ(q["mode"], "turboquant");
  EXPECT_EQ(q["format_version"], 2);
  EXPECT_EQ(q["bits"], 4);
  EXPECT_EQ(q["scale"], "rms");
  const auto& t = q["tensors"]["model.layers.0.mlp.down_proj"];
  EXPECT_EQ(t["format"], "q4");
  EXPECT_EQ(t["rotation_group"], "model.layers.0.mlp_down");
  EXPECT_EQ(t["rotation_block"], 128);  // 1408 = 11 * 128
  EXPECT_TRUE(q["tensors"]["model.embed_tokens"]["rotation_group"].is_null());

  const auto ckpt = Checkpoint::Open(tmp.file("q"));
  const TensorView codes = ckpt->View("model.layers.0.mlp.down_proj.codes");
  EXPECT_EQ(codes.dtype, DType::U8);
  EXPECT_EQ(codes.shape, (Shape{512, 1408 / 2}));
  EXPECT_EQ(ckpt->View("model.layers.0.mlp.down_proj.scales").shape, (Shape{512, 1408 / 64}));
  EXPECT_EQ(ckpt->View("model.layers.0.mlp.down_proj.codebook").shape, (Shape{16}));
  EXPECT_EQ(ckpt->View("model.layers.0.mlp_down.signs").shape, (Shape{11, 16}));
  // One sign vector for q/k/v: stored once.
  EXPECT_TRUE(ckpt->Has("model.layers.0.attn_in.signs"));
  EXPECT_FALSE(ckpt->Has("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(ckpt->View("model.embed_tokens.codes").shape, (Shape{8192, 512}));
  EXPECT_EQ(ckpt->View("model.layers.0.input_layernorm.weight").dtype, DType::BF16);
  // The plan's projection is the conversion.
  uint64_t bytes = 0;
  for (const std::string& n : ckpt->Names()) bytes += ckpt->Info(n).nbytes;
  EXPECT_EQ(int64_t(bytes), s.output_bytes);
}

TEST(Convert, StreamingWritesTheSameBytes) {
  TempDir tmp;
  ConvertOptions a = test::Options(ModelDir(kMoe), tmp.file("a"), 3);
  ConvertOptions b = a;
  b.out_dir = tmp.file("b");
  b.streaming = true;
  b.chunk_floats = 1000;  // row chunks of 3 rows (256 columns): same codes and scales
  Convert(a);
  Convert(b);
  EXPECT_EQ(ReadFileToString(tmp.file("a/model.safetensors")),
            ReadFileToString(tmp.file("b/model.safetensors")));
  // e8 scales: the shared tables come from a pass over all chunks of all members first.
  a.recipe.scale_format = b.recipe.scale_format = quant::ScaleFormat::kE8;
  a.out_dir = tmp.file("c");
  b.out_dir = tmp.file("d");
  Convert(a);
  Convert(b);
  EXPECT_EQ(ReadFileToString(tmp.file("c/model.safetensors")),
            ReadFileToString(tmp.file("d/model.safetensors")));
}

TEST(Convert, ShardedOutputLoadsAndMatches) {
  TempDir tmp;
  ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("s"), 4);
  o.shard_bytes = 4 << 20;
  const ConvertSummary s = Convert(o);
  EXPECT_GT(s.num_shards, 2);
  EXPECT_TRUE(fs::exists(tmp.file("s/model.safetensors.index.json")));
  EXPECT_TRUE(
      fs::exists(tmp.file(fmt::format("s/model-00001-of-{:05d}.safetensors", s.num_shards))));
  EXPECT_FALSE(fs::exists(tmp.file("s/model.safetensors")));
  o.out_dir = tmp.file("u");
  o.shard_bytes = uint64_t(1) << 40;
  Convert(o);
  const std::vector<int32_t> ids = test::GoldenIds(o.model_dir);
  EXPECT_EQ(test::PrefillLogits(tmp.file("s"), ids), test::PrefillLogits(tmp.file("u"), ids));
}

TEST(Convert, InterruptedConvertLeavesNothing) {
  TempDir tmp;
  for (bool streaming : {false, true}) {
    ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("out"), 4);
    o.streaming = streaming;
    o.fail_after_tensors = 5;
    EXPECT_THROW(Convert(o), Error);
    EXPECT_FALSE(fs::exists(tmp.file("out")));
    EXPECT_TRUE(fs::is_empty(tmp.path())) << "a temp dir was left behind";
  }
}

TEST(Convert, ExistingOutputNeedsForce) {
  TempDir tmp;
  fs::create_directories(tmp.file("out"));
  test::WriteFile(tmp.file("out/keep"), "x");
  ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("out"), 4);
  EXPECT_THROW(Convert(o), UsageError);
  EXPECT_TRUE(fs::exists(tmp.file("out/keep")));
  o.force = true;
  Convert(o);
  EXPECT_FALSE(fs::exists(tmp.file("out/keep")));
  EXPECT_TRUE(fs::exists(tmp.file("out/config.json")));
}

TEST(Convert, BudgetKeepsTheAverageAndLoads) {
  TempDir tmp;
  ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("b"), 4);
  o.budget_bpw = 3.0;
  const ConvertSummary s = Convert(o);
  EXPECT_LE(s.linear_bits_per_weight, 3.0 + 1e-9);
  EXPECT_GT(s.linear_bits_per_weight, 2.8);  // the budget is used, not wasted
  const auto cfg = nlohmann::json::parse(ReadFileToString(tmp.file("b/config.json")));
  std::set<std::string> formats;
  for (const auto& [n, t] : cfg["quantization"]["tensors"].items())
    if (n != "model.embed_tokens") formats.insert(t["format"].get<std::string>());
  EXPECT_GT(formats.size(), 1u) << "a budget between widths mixes formats";
  const std::vector<int32_t> ids = test::GoldenIds(o.model_dir);
  EXPECT_EQ(test::PrefillLogits(tmp.file("b"), ids).size(), ids.size() * 8192);
  ExpectPlanBoundsWhatWasWritten(o, tmp.file("b"));

  o.out_dir = tmp.file("c");
  o.budget_bpw = 1.7;  // below q2 with g128 (2.125)
  EXPECT_THROW(Convert(o), UsageError);
  EXPECT_FALSE(fs::exists(tmp.file("c")));
}

TEST(Convert, BadOptionsAreUsageErrors) {
  TempDir tmp;
  ConvertOptions o = test::Options(ModelDir(kLlama), tmp.file("x"), 5);
  EXPECT_THROW(Convert(o), UsageError);
  o.recipe.bits = 4;
  o.recipe.protect_layers = "3-1";
  EXPECT_THROW(Convert(o), UsageError);
  EXPECT_FALSE(fs::exists(tmp.file("x")));
}

}  // namespace
}  // namespace tq
