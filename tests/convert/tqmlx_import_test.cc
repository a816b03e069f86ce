// turboquant-mlx checkpoints (io/tqmlx_import.h) written from the shared models by the test
// writer: the imported model computes what the float product of the dequantized weights
// computes, `convert --repack` is lossless, unsupported tensors and options are errors naming
// them, and a 4-bit one's perplexity is within noise of our own 4-bit conversion.
#include "io/tqmlx_import.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "convert/repack.h"
#include "convert_helpers.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/cpu/isa.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "runtime/plan/memory_plan.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"
#include "tqmlx_writer.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using test::ModelDir;
using test::TempDir;
using test::TqMlxWriteOptions;

const char* kLlama = "tq-llama-21m";
const char* kMoe = "tq-qwen3moe-17m";

// Imported forward == forward of the float twin (prefill and decode, float kernels).
void ExpectMatchesTwin(const std::string& model, TqMlxWriteOptions o) {
  TempDir tmp;
  o.float_twin_dir = tmp.file("twin");
  const std::string src = test::RequireFile(ModelDir(model) + "/model.safetensors");
  test::WriteTqMlxCheckpoint(ModelDir(model), tmp.file("mlx"), o);
  ASSERT_TRUE(tqmlx::IsTqMlxDir(tmp.file("mlx")));
  const std::vector<int32_t> ids = test::GoldenIds(ModelDir(model));
  const kernels::cpu::Isa saved = kernels::cpu::ActiveIsa();
  kernels::cpu::SetActiveIsa(kernels::cpu::Isa::kScalar);
  EXPECT_LT(test::RelativeMaxError(test::PrefillLogits(tmp.file("mlx"), ids),
                                   test::PrefillLogits(tmp.file("twin"), ids)),
            1e-4);
  EXPECT_LT(test::RelativeMaxError(test::DecodeLogits(tmp.file("mlx"), ids),
                                   test::DecodeLogits(tmp.file("twin"), ids)),
            1e-4);
  kernels::cpu::SetActiveIsa(saved);
}

TEST(TqMlxImport, Llama3BitRotatedEqualsFloatProduct) { ExpectMatchesTwin(kLlama, {}); }

TEST(TqMlxImport, Llama4BitDescendingCodebookEqualsFloatProduct) {
  TqMlxWriteOptions o;
  o.bits = 4;
  o.reverse_codebook = true;  // codes are remapped to our ascending codebook
  o.group_size = 32;
  ExpectMatchesTwin(kLlama, o);
}

TEST(TqMlxImport, Llama2And1BitEqualsFloatProduct) {
  TqMlxWriteOptions o;
  o.bits = 2;
  ExpectMatchesTwin(kLlama, o);
  o.bits = 1;
  o.group_size = 128;
  ExpectMatchesTwin(kLlama, o);
}

TEST(TqMlxImport, UnrotatedAndLegacyRotatedNoneEqualFloatProduct) {
  TqMlxWriteOptions o;
  o.rotation = "none";  // the rotation fused away: all +1 signs, weights as they are
  ExpectMatchesTwin(kLlama, o);
  o.legacy_rotated_none = true;  // "none" in config.json but -1 signs: rotated (their rule)
  ExpectMatchesTwin(kLlama, o);
}

TEST(TqMlxImport, MoeUnrotatedTernaryExpertsEqualFloatProduct) {
  TqMlxWriteOptions o;
  o.rotation = "none";
  o.ternary_experts = true;  // trits, 20 per word
  o.group_size = 32;
  ExpectMatchesTwin(kMoe, o);
}

TEST(TqMlxImport, MoeExpertsUnderHuggingFaceNames) {
  TempDir tmp;
  TqMlxWriteOptions o;
  o.rotation = "none";
  o.group_size = 32;
  test::WriteTqMlxCheckpoint(ModelDir(kMoe), tmp.file("mlx"), o);
  const auto c = Checkpoint::Open(tmp.file("mlx"));
  EXPECT_EQ(c->source_format(), "turboquant-mlx");
  EXPECT_TRUE(c->Has("model.layers.0.mlp.experts.31.down_proj.codes"));
  EXPECT_TRUE(c->Has("model.layers.0.mlp.experts.0.gate_proj.scales"));
  EXPECT_FALSE(c->Has("model.layers.0.mlp.switch_mlp.down_proj.weight"));
  EXPECT_TRUE(c->Has("model.layers.0.mlp.gate.weight"));  // the router, as stored
  // ReadHeaders (plan, doctor, inspect) lists exactly the imported tensors.
  const std::vector<TensorInfo> h = Checkpoint::ReadHeaders(tmp.file("mlx"));
  ASSERT_EQ(h.size(), c->Names().size());
  for (const TensorInfo& t : h) {
    EXPECT_EQ(t.shape, c->Info(t.name).shape) << t.name;
    EXPECT_EQ(t.dtype, c->Info(t.name).dtype) << t.name;
  }
  const ModelConfig cfg = LoadModelConfig(tmp.file("mlx"));
  const auto q = nlohmann::json::parse(cfg.raw_json)["quantization"];
  EXPECT_EQ(q["format_version"], 2);
  EXPECT_EQ(q["tensors"]["model.layers.5.mlp.experts.7.up_proj"]["format"], "q3");
}

TEST(TqMlxImport, MoeG64KeepsStackedFloatDownExpertsAndEqualsFloatProduct) {
  // 96 (the experts' down_proj input) is no multiple of 64: turboquant-mlx keeps those stacked in
  // bf16 ([E, out, in] under switch_mlp), served as per-expert slices.
  ExpectMatchesTwin(kMoe, {});
}

TEST(TqMlxImport, MoeRotatedTwelvePointBlocksEqualFloatProduct) {
  TqMlxWriteOptions o;
  o.group_size = 32;  // now down_proj (in = 96 = 12 x 8) is quantized and rotated by H_12 x H_8
  ExpectMatchesTwin(kMoe, o);
  TempDir tmp;
  test::WriteTqMlxCheckpoint(ModelDir(kMoe), tmp.file("mlx"), o);
  const ModelConfig cfg = LoadModelConfig(tmp.file("mlx"));
  const auto q = nlohmann::json::parse(cfg.raw_json)["quantization"];
  EXPECT_EQ(q["tensors"]["model.layers.0.mlp.experts.3.down_proj"]["rotation_block"], 96);
}

TEST(TqMlxImport, FusedRotationsTakeTheInputUnrotatedAndEqualFloatProduct) {
  TqMlxWriteOptions o;
  o.fuse_rotations = true;  // q/k/v/gate/up rotated, used with the unrotated input; o/down online
  ExpectMatchesTwin(kLlama, o);
  TempDir tmp;
  test::WriteTqMlxCheckpoint(ModelDir(kLlama), tmp.file("mlx"), o);
  EXPECT_NE(tqmlx::Describe(tmp.file("mlx")).find("30 with the rotation fused into their norm"),
            std::string::npos)
      << tqmlx::Describe(tmp.file("mlx"));
  // qwen3_moe is not in turboquant-mlx's rotation configs: which projections were fused is unknown.
  o.group_size = 32;
  test::WriteTqMlxCheckpoint(ModelDir(kMoe), tmp.file("moe"), o);
  try {
    Model::Load(tmp.file("moe"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuse_rotations = true for model_type 'qwen3_moe'"),
              std::string::npos)
        << e.what();
  }
}

// Σ (a - b)² / Σ b² of two logit vectors.
double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return num / den;
}

TEST(TqMlxImport, QjlResidualsEqualFloatProductAndBringTheWeightsCloser) {
  TqMlxWriteOptions o;
  o.qjl = true;
  o.bits = 2;
  ExpectMatchesTwin(kLlama, o);  // twin = Rᵀ (deq + α ν Sᵀ b)
  TempDir tmp;
  test::WriteTqMlxCheckpoint(ModelDir(kLlama), tmp.file("mlx"), o);
  EXPECT_NE(tqmlx::Describe(tmp.file("mlx")).find("42 with QJL residuals"), std::string::npos)
      << tqmlx::Describe(tmp.file("mlx"));
  // The correction is unbiased and removes ~43% of the residual energy: with it the logits are
  // nearer the bf16 model's than without (TURBOQUANT_MLX_SKIP_QJL=1 drops the tensors).
  const std::vector<int32_t> ids = test::GoldenIds(ModelDir(kLlama));
  const std::vector<float> ref = test::PrefillLogits(ModelDir(kLlama), ids);
  const double with = Nmse(test::PrefillLogits(tmp.file("mlx"), ids), ref);
  ::setenv("TURBOQUANT_MLX_SKIP_QJL", "1", 1);
  const double without = Nmse(test::PrefillLogits(tmp.file("mlx"), ids), ref);
  EXPECT_NE(tqmlx::Describe(tmp.file("mlx")).find("QJL tensors dropped"), std::string::npos);
  ::unsetenv("TURBOQUANT_MLX_SKIP_QJL");
  std::printf("2-bit logits vs bf16, NMSE: with QJL %.5f, without %.5f\n", with, without);
  EXPECT_LT(with, without);
}

// The tensors of a turboquant-mlx directory as stored (test::ReadTensors would import them).
test::TensorMap StoredTensors(const std::string& dir) {
  const auto c = Checkpoint::OpenStored(dir);
  test::TensorMap m;
  for (const std::string& n : c->Names()) {
    const TensorView v = c->View(n);
    m[n] = {v.dtype, v.shape, {v.bytes(), v.bytes() + v.nbytes()}};
  }
  return m;
}

// Rewrites config.json's quantization block or one tensor of a written checkpoint, then expects
// loading to fail with a message holding `expect`.
void ExpectBroken(const std::function<void(nlohmann::json& q, test::TensorMap& t)>& edit,
                  const std::string& expect) {
  TempDir tmp;
  TqMlxWriteOptions o;
  o.bits = 2;
  const std::string dir = tmp.file("mlx");
  test::WriteTqMlxCheckpoint(ModelDir(kLlama), dir, o);
  nlohmann::json cfg = nlohmann::json::parse(ReadFileToString(dir + "/config.json"));
  test::TensorMap tensors = StoredTensors(dir);
  edit(cfg["quantization"], tensors);
  test::WriteTensors(dir, tensors);
  WriteFileAtomic(dir + "/config.json", cfg.dump());
  try {
    Model::Load(dir);
    FAIL() << "expected an error with '" << expect << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
  }
}

const char* kQ = "model.layers.2.self_attn.q_proj";

TEST(TqMlxImport, BrokenInputsAreErrorsNamingTheProblem) {
  ExpectBroken([](auto& q, auto&) { q["rotation"] = "givens"; }, "rotation 'givens'");
  ExpectBroken([](auto& q, auto&) { q["new_trick"] = 1; }, "quantization.new_trick");
  ExpectBroken([](auto& q, auto&) { q["affine_extras"] = {{"bits", 4}}; }, "affine_extras");
  const std::string q = kQ;
  ExpectBroken(
      [&](auto&, auto& t) {
        t[q + ".codebook"].shape = {5};
        t[q + ".codebook"].bytes.resize(10);
      },
      q + ".codebook' has 5 levels");
  ExpectBroken(
      [&](auto&, auto& t) {
        auto& w = t[q + ".weight"];
        w.shape[1] -= 1;  // one word short per row
        w.bytes.resize(size_t(w.shape[0] * w.shape[1] * 4));
      },
      q + ".weight' has");
  ExpectBroken(
      [&](auto&, auto& t) {
        t[q + ".signs"].bytes[0] = 0;
        t[q + ".signs"].bytes[1] = 0x38;
      },
      q + ".signs' holds 0.5");
  ExpectBroken([&](auto&, auto& t) { t.erase(q + ".scales"); },
               "missing tensor '" + q + ".scales'");
  ExpectBroken([&](auto&, auto& t) { t[q + ".scales"].dtype = DType::BF16; },
               q + ".scales' is BF16");
  ExpectBroken(
      [&](auto&, auto& t) {
        t["model.embed_tokens.biases"] = {DType::F16, {2}, std::vector<uint8_t>(4)};
      },
      "model.embed_tokens.biases");
  ExpectBroken(
      [&](auto&, auto& t) {
        t["model.extra.weight"] = {DType::U32, {2, 2}, std::vector<uint8_t>(16)};
      },
      "model.extra.weight' is U32 packed data without a '.codebook'");
}

// QJL tensors for linear `q` of a written checkpoint (use_qjl on), with `extra_words` more
// words per row of bits than its input needs.
void AddQjl(nlohmann::json& c, test::TensorMap& t, const std::string& q, int64_t extra_words) {
  c["use_qjl"] = true;
  const int64_t out = t[q + ".weight"].shape[0], in = t[q + ".signs"].shape[0];
  const int64_t words = (in + 31) / 32 + extra_words;
  t[q + ".qjl_packed"] = {DType::U32, {out, words}, std::vector<uint8_t>(size_t(out * words * 4))};
  t[q + ".qjl_norms"] = {DType::F16, {out}, std::vector<uint8_t>(size_t(out * 2))};
  t[q + ".qjl_signs"] = t[q + ".signs"];
}

TEST(TqMlxImport, BrokenQjlTensorsAreErrorsNamingThem) {
  const std::string q = kQ;
  ExpectBroken(
      [&](auto& c, auto& t) {
        c["use_qjl"] = true;
        t[q + ".qjl_norms"] = {DType::F16, {1}, std::vector<uint8_t>(2)};
      },
      "missing tensor '" + q + ".qjl_packed'");
  ExpectBroken([&](auto& c, auto& t) { AddQjl(c, t, q, 1); }, q + ".qjl_packed' is U32");
  ExpectBroken(
      [&](auto& c, auto& t) {
        AddQjl(c, t, q, 0);
        t[q + ".qjl_signs"].bytes[0] = 0;
        t[q + ".qjl_signs"].bytes[1] = 0x38;
      },
      q + ".qjl_signs' holds 0.5");
  ExpectBroken(
      [&](auto&, auto& t) {
        t["model.layers.0.self_attn.o_proj.qjl_norms"] = t["model.layers.0.self_attn.o_proj.signs"];
      },
      "'model.layers.0.self_attn.o_proj' has QJL tensors but quantization.use_qjl is false");
  ExpectBroken(
      [&](auto& c, auto& t) {
        c["use_qjl"] = true;
        t["model.extra.qjl_norms"] = {DType::F16, {2}, std::vector<uint8_t>(4)};
      },
      "tensor 'model.extra.qjl_norms': a QJL tensor of no quantized linear");
}

TEST(TqMlxImport, TritWordsPastThreeToTheTwentiethAreErrors) {
  TempDir tmp;
  TqMlxWriteOptions o;
  o.rotation = "none";
  o.ternary_experts = true;
  o.group_size = 32;
  const std::string dir = tmp.file("mlx");
  test::WriteTqMlxCheckpoint(ModelDir(kMoe), dir, o);
  test::TensorMap t = StoredTensors(dir);
  auto& w = t["model.layers.1.mlp.switch_mlp.up_proj.weight"];
  const uint32_t bad = 3486784401u;  // 3^20
  std::memcpy(w.bytes.data() + 4 * 7, &bad, 4);
  test::WriteTensors(dir, t);
  try {
    Model::Load(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trit word 7 is 3486784401"), std::string::npos)
        << e.what();
  }
}

TEST(TqMlxImport, RepackIsLosslessAndAtomic) {
  TempDir tmp;
  TqMlxWriteOptions o;
  o.bits = 3;
  test::WriteTqMlxCheckpoint(ModelDir(kLlama), tmp.file("mlx"), o);
  RepackOptions r;
  r.model_dir = tmp.file("mlx");
  r.out_dir = tmp.file("native");
  r.shard_bytes = 4 << 20;  // several shards + index
  const RepackSummary s = Repack(r);
  EXPECT_GT(s.num_shards, 1);
  EXPECT_EQ(s.linears, 6 * 7);
  EXPECT_FALSE(tqmlx::IsTqMlxDir(r.out_dir));
  EXPECT_TRUE(fs::exists(r.out_dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(r.out_dir + "/tokenizer.json"));
  EXPECT_EQ(Checkpoint::Open(r.out_dir)->source_format(), "");
  // plan names the source format (its startup line and --json), and not for the repacked copy.
  PlanOptions po;
  po.model_dir = r.model_dir;
  EXPECT_EQ(MakeMemoryPlan(po).source_format, "turboquant-mlx");
  po.model_dir = r.out_dir;
  EXPECT_EQ(MakeMemoryPlan(po).source_format, "");
  const std::vector<int32_t> ids = test::GoldenIds(ModelDir(kLlama));
  // Same tensors, same kernels: bit-identical logits.
  EXPECT_EQ(test::PrefillLogits(r.out_dir, ids), test::PrefillLogits(r.model_dir, ids));
  EXPECT_EQ(test::DecodeLogits(r.out_dir, ids), test::DecodeLogits(r.model_dir, ids));
  // An existing --out needs force; a native source is not a repack source; nothing half-written.
  EXPECT_THROW(Repack(r), UsageError);
  RepackOptions bad = r;
  bad.model_dir = ModelDir(kLlama);
  bad.out_dir = tmp.file("x");
  EXPECT_THROW(Repack(bad), UsageError);
  for (const auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-convert"), std::string::npos);
}

double Perplexity(const std::string& dir, const std::vector<int32_t>& tokens) {
  auto model = Model::Load(dir);
  PerplexityOptions po;
  po.max_tokens = int64_t(tokens.size());
  po.progress = false;
  return ComputePerplexity(*model, tokens, po).ppl;
}

TEST(TqMlxImport, FourBitPerplexityWithinNoiseOfOurFourBit) {
  TempDir tmp;
  TqMlxWriteOptions o;
  o.bits = 4;
  test::WriteTqMlxCheckpoint(ModelDir(kLlama), tmp.file("mlx"), o);
  ConvertOptions c = test::Options(ModelDir(kLlama), tmp.file("ours"), 4);
  c.recipe.scale_format = quant::ScaleFormat::kF16;
  Convert(c);
  const auto tok = Tokenizer::Load(ModelDir(kLlama));
  std::vector<int32_t> ids =
      tok->Encode(ReadFileToString(test::RequireFile(test::EvalFile("eval_other.txt"))), false);
  ids.resize(std::min<size_t>(ids.size(), 8192));
  const double mlx = Perplexity(tmp.file("mlx"), ids), ours = Perplexity(tmp.file("ours"), ids);
  const double bf16 = Perplexity(ModelDir(kLlama), ids);
  std::printf("perplexity on %zu tokens of eval_other: bf16 %.4f, ours q4 %.4f, mlx q4 %.4f\n",
              ids.size(), bf16, ours, mlx);
  EXPECT_LT(std::fabs(mlx / ours - 1), 0.03);
  EXPECT_GT(mlx, bf16 * 0.99);
}

}  // namespace
}  // namespace tq

namespace tq {
namespace {

// Not a test: writes a 3-bit g64 turboquant-mlx checkpoint of tq-llama-21m to
// $TQ_MLX_BENCH_OUT for the decode-speed comparison in docs/BENCHMARKS.md (run with
// --gtest_also_run_disabled_tests --gtest_filter='*WriteBenchCheckpoint').
TEST(TqMlxImport, DISABLED_WriteBenchCheckpoint) {
  const char* out = std::getenv("TQ_MLX_BENCH_OUT");
  ASSERT_NE(out, nullptr) << "set TQ_MLX_BENCH_OUT";
  test::WriteTqMlxCheckpoint(ModelDir(kLlama), out, {});
}

}  // namespace
}  // namespace tq
