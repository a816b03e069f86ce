// gpt_oss's experts through convert (../shared/models/arch/tq-arch-gpt-oss: 4 layers, 8 experts
// of 128 × 128, fused [E, in, 2·ffn] gate/up interleaved as published): the per-expert layout the
// conversion reads is the fused one rearranged (loaded as bf16 it computes the same bits as the
// fused checkpoint and matches the golden logits); `convert --bits 4` writes every expert's gate,
// up and down as packed linears with float biases, which doctor passes, plan counts as experts,
// and the expert cache streams bit-identically.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert_helpers.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/kv_cache.h"
#include "model/expert_cache.h"
#include "model/model.h"
#include "model/source_tensors.h"
#include "runtime/doctor/doctor.h"
#include "runtime/plan/memory_plan.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

std::string GptOss() {
  const std::string dir = test::ModelDir("arch/tq-arch-gpt-oss");
  test::RequireFile(dir + "/model.safetensors");
  return dir;
}

void CopyConfigAndTokenizer(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from)) {
    const std::string n = e.path().filename().string();
    if (n == "config.json" || n.starts_with("tokenizer") || n.starts_with("generation_config"))
      fs::copy_file(e.path(), fs::path(to) / n);
  }
}

// `dir` written with the tensors a conversion reads (SourceReader): per-expert bf16 linears.
void WritePerExpert(const std::string& src, const std::string& dir) {
  const ModelConfig config = LoadModelConfig(src);
  std::vector<std::string> shards;
  const std::vector<TensorInfo> stored = Checkpoint::ReadHeaders(src, &shards);
  const auto file = SafetensorsFile::Open(shards.at(0));
  const SourceReader reader(SourceTensors(config, stored), stored,
                            [&](size_t i, uint64_t begin, uint64_t n, uint8_t* dst) {
                              const TensorView v = file->View(stored[i].name);
                              std::memcpy(dst, v.bytes() + begin, size_t(n));
                            });
  CopyConfigAndTokenizer(src, dir);
  test::TensorMap m;
  for (size_t i = 0; i < reader.sources().size(); ++i) {
    const TensorInfo& t = reader.sources()[i].info;
    m[t.name] = {t.dtype, t.shape, reader.Read(i)};
  }
  test::WriteTensors(dir, m);
}

TEST(GptOssConvert, PerExpertLayoutComputesTheFusedBits) {
  test::TempDir tmp;
  const std::string src = GptOss(), per = tmp.file("per");
  WritePerExpert(src, per);
  const test::TensorMap t = test::ReadTensors(per);
  EXPECT_FALSE(t.count("model.layers.0.mlp.experts.gate_up_proj"));
  ASSERT_TRUE(t.count("model.layers.3.mlp.experts.7.down_proj.bias"));
  EXPECT_EQ(t.at("model.layers.0.mlp.experts.5.gate_proj.weight").shape, (Shape{128, 128}));
  const std::vector<int32_t> ids = test::GoldenIds(src);
  const std::vector<float> fused = test::PrefillLogits(src, ids);
  const std::vector<float> split = test::PrefillLogits(per, ids);
  ASSERT_EQ(fused.size(), split.size());
  // The same bf16 matrices and biases in the same kernels: the same bits.
  EXPECT_EQ(std::memcmp(fused.data(), split.data(), fused.size() * sizeof(float)), 0);
  const auto golden = SafetensorsFile::Open(src + "/golden.safetensors");
  const TensorView g = golden->View("logits");
  const std::vector<float> want(g.as<float>(), g.as<float>() + g.numel());
  EXPECT_LT(test::RelativeMaxError(split, want), 2e-3);
}

class GptOssConverted : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir();
    ConvertOptions o = test::Options(GptOss(), tmp_->file("q4"), 4);
    summary_ = Convert(o);
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string Dir() { return tmp_->file("q4"); }
  static test::TempDir* tmp_;
  static ConvertSummary summary_;
};
test::TempDir* GptOssConverted::tmp_ = nullptr;
ConvertSummary GptOssConverted::summary_;

TEST_F(GptOssConverted, EveryExpertProjectionIsPacked) {
  const nlohmann::json cfg = nlohmann::json::parse(ReadFileToString(Dir() + "/config.json"));
  const nlohmann::json& tensors = cfg["quantization"]["tensors"];
  const test::TensorMap t = test::ReadTensors(Dir());
  for (int l = 0; l < 4; ++l) {
    for (int e = 0; e < 8; ++e) {
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        const std::string p = fmt::format("model.layers.{}.mlp.experts.{}.{}", l, e, proj);
        ASSERT_TRUE(tensors.contains(p)) << p;
        EXPECT_EQ(tensors[p]["format"], "q4") << p;
        EXPECT_EQ(tensors[p]["shape"], nlohmann::json({128, 128})) << p;
        EXPECT_EQ(tensors[p]["rotation_group"],
                  fmt::format("model.layers.{}.{}", l,
                              std::string(proj) == "down_proj" ? "experts_down" : "experts_in"));
        EXPECT_TRUE(t.count(p + ".codes")) << p;
        ASSERT_TRUE(t.count(p + ".bias")) << p;  // float, as published (bf16)
        EXPECT_EQ(t.at(p + ".bias").dtype, DType::BF16);
        EXPECT_FALSE(t.count(p + ".weight")) << p;
      }
    }
    EXPECT_FALSE(t.count(fmt::format("model.layers.{}.mlp.experts.gate_up_proj", l)));
    EXPECT_TRUE(t.count(fmt::format("model.layers.{}.mlp.router.weight", l)));  // float
    EXPECT_TRUE(t.count(fmt::format("model.layers.{}.self_attn.sinks", l)));
  }
  // Codes + fp16 scales of g64: 4.25 bits per linear weight (4.94 with the experts in bf16).
  EXPECT_NEAR(summary_.linear_bits_per_weight, 4.25, 1e-9);
  EXPECT_EQ(cfg["quantization"]["linear_bits_per_weight"].get<double>(),
            summary_.linear_bits_per_weight);
}

TEST_F(GptOssConverted, DoctorPassesAndPlanCountsTheExperts) {
  DoctorOptions d;
  d.model_dir = Dir();
  d.ram_gb = 64;
  const DoctorReport r = RunDoctor(d);
  for (const auto& c : r.checks) {
    if (c.check == "cpu") continue;
    EXPECT_EQ(c.status, CheckStatus::kOk) << c.check << ": " << c.hint;
  }
  PlanOptions p;
  p.model_dir = Dir();
  p.context = 256;
  p.ram_gb = 64;
  const MemoryPlan plan = MakeMemoryPlan(p);
  EXPECT_EQ(plan.unused_bytes, 0);
  // 4 layers × 8 experts × 3 projections of 128 × 128 q4 g64: codes, scales, codebook, bias.
  EXPECT_EQ(plan.expert_bytes, 4 * 8 * 3 * (128 * 64 + 128 * 2 * 2 + 16 * 4 + 128 * 2));
  // plan's projection of the source equals what convert wrote (the same per-expert tensors),
  // the projection counting the experts' sign vectors (2 groups of 128 bits a layer) as theirs.
  PlanOptions src = p;
  src.model_dir = GptOss();
  src.recipe = test::Options(GptOss(), "", 4).recipe;
  const MemoryPlan projected = MakeMemoryPlan(src);
  EXPECT_EQ(projected.expert_bytes, plan.expert_bytes + 4 * 2 * 16);
  EXPECT_EQ(projected.weights_bytes, plan.weights_bytes);
}

TEST_F(GptOssConverted, ExpertCacheIsBitIdentical) {
  const std::vector<int32_t> ids = test::GoldenIds(GptOss());
  auto logits = [&](Model& m) {
    auto cache = m.NewCache(KvCacheOptions{int64_t(ids.size()) + 4, KvDType::kF32});
    std::vector<float> out(ids.size() * size_t(m.vocab_size()));
    m.Forward(ids, *cache, out.data(), /*all_logits=*/true);
    std::vector<float> step(size_t(m.vocab_size()));
    for (int32_t t : {5, 77, 1234}) {
      m.Forward(std::span(&t, 1), *cache, step.data());
      out.insert(out.end(), step.begin(), step.end());
    }
    return out;
  };
  auto resident = Model::Load(Dir(), {.device = "cpu"});
  const std::vector<float> want = logits(*resident);
  const int64_t slot = Model::Load(Dir(), {.device = "cpu", .expert_cache_bytes = int64_t(1) << 40})
                           ->expert_cache()
                           ->slot_bytes();
  for (int64_t slots : {1, 3, 32}) {
    SCOPED_TRACE(slots);
    auto m = Model::Load(Dir(), {.device = "cpu", .expert_cache_bytes = slots * slot + slot / 2});
    ASSERT_NE(m->expert_cache(), nullptr);
    EXPECT_EQ(m->expert_cache()->slots(), slots);
    const std::vector<float> got = logits(*m);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
    EXPECT_GT(m->expert_cache()->stats().misses, 0);
  }
}

}  // namespace
}  // namespace tq
