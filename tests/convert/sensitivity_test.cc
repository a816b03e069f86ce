// Measured sensitivities (convert/sensitivity.h) and the whole-file budget (--target-size) on the
// shared models: α is positive and deterministic, the KL grows with the square of the noise (the
// linearity the allocator relies on), and a --target-size file is at most its target and loads.
#include "convert/sensitivity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "convert/budget.h"
#include "convert/convert.h"
#include "convert_helpers.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using test::ModelDir;
using test::TempDir;

using Source = test::PlannedSource;

Source Open(const std::string& model) {
  QuantRecipeOptions ro;
  ro.embed_bits = 8;
  return test::OpenPlanned(ModelDir(model), ro);
}

size_t IndexOf(const Source& s, const std::string& name) {
  for (size_t i = 0; i < s.recipe.tensors.size(); ++i)
    if (s.recipe.tensors[i].name == name) return i;
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

SensitivityOptions Small(double noise) {
  SensitivityOptions o;
  o.sequences = 2;
  o.tokens = 24;
  o.noise = noise;
  o.progress = false;
  return o;
}

TEST(Sensitivity, PositiveDeterministicAndQuadraticInTheNoise) {
  const Source s = Open("tq-llama-21m");
  const std::vector<size_t> which = {IndexOf(s, "model.layers.0.self_attn.v_proj.weight"),
                                     IndexOf(s, "model.layers.3.self_attn.q_proj.weight"),
                                     IndexOf(s, "model.embed_tokens.weight")};
  auto read = [&](size_t i) { return s.Read(i); };
  const auto a = MeasureSensitivity(s.dir, s.recipe, which, Small(0.0625), read);
  const auto b = MeasureSensitivity(s.dir, s.recipe, which, Small(0.0625), read);
  const auto c = MeasureSensitivity(s.dir, s.recipe, which, Small(0.125), read);
  ASSERT_EQ(a.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k) {
    SCOPED_TRACE(a[k].name);
    EXPECT_EQ(a[k].name, s.recipe.tensors[which[k]].name);
    EXPECT_GT(a[k].alpha, 0);
    EXPECT_EQ(a[k].alpha, b[k].alpha) << "same seed, same α";
    // The realized relative error is the asked-for t² (Gaussian noise, per-group RMS scaled).
    EXPECT_NEAR(a[k].t2, 0.0625 * 0.0625, 0.1 * 0.0625 * 0.0625);
    EXPECT_NEAR(c[k].t2, 0.125 * 0.125, 0.1 * 0.125 * 0.125);
    // Twice the noise, four times the KL: α (= KL / t²) within 35% at both sizes.
    EXPECT_GT(c[k].kl, 2.5 * a[k].kl);
    EXPECT_NEAR(c[k].alpha / a[k].alpha, 1.0, 0.35);
  }
  // Layer 0's values matter more than a middle layer's queries (measured: ~40x; asserted 3x).
  EXPECT_GT(a[0].alpha, 3 * a[1].alpha);
}

TEST(Sensitivity, ExpertsAreMeasuredAsOneSetAndShareItsAlpha) {
  const Source s = Open("tq-qwen3moe-17m");
  std::vector<size_t> which;
  for (size_t i = 0; i < s.recipe.tensors.size(); ++i) {
    const TensorDecision& d = s.recipe.tensors[i];
    if (d.layer == 2 && d.role == TensorRole::kExpertDown) which.push_back(i);
  }
  ASSERT_GT(which.size(), 4u);
  const auto r =
      MeasureSensitivity(s.dir, s.recipe, which, Small(0.125), [&](size_t i) { return s.Read(i); });
  double sum = 0;
  for (const auto& t : r) {
    EXPECT_EQ(t.kl, r[0].kl) << t.name << ": one perturbation for the set";
    EXPECT_NEAR(t.alpha, r[0].alpha, 1e-12) << "equal shapes, equal shares";
    sum += t.alpha;
  }
  EXPECT_NEAR(sum, r[0].kl / r[0].t2, 1e-9 * sum);
}

TEST(TargetSize, ParsesSizes) {
  EXPECT_EQ(ParseFileSize("13.2MB"), 13'200'000);
  EXPECT_EQ(ParseFileSize("13.2 mb"), 13'200'000);
  EXPECT_EQ(ParseFileSize("12MiB"), 12 * 1048576);
  EXPECT_EQ(ParseFileSize("1.5GiB"), int64_t(1.5 * 1073741824.0));
  EXPECT_EQ(ParseFileSize("4.5G"), 4'500'000'000);
  EXPECT_EQ(ParseFileSize("800K"), 800'000);
  EXPECT_EQ(ParseFileSize("123456"), 123456);
  for (const char* bad : {"", "MB", "-3MB", "13.2XB", "1.2.3MB", "0", "abc"})
    EXPECT_THROW(ParseFileSize(bad), UsageError) << bad;
}

TEST(TargetSize, WholeFileFitsChoosesTheEmbeddingAndLoads) {
  TempDir tmp;
  ConvertOptions o = test::Options(ModelDir("tq-llama-21m"), tmp.file("t"), 4);
  o.recipe.scale_format = quant::ScaleFormat::kE8;
  o.recipe.embed_bits = 16;  // the allocator chooses the embedding itself
  o.target_bytes = 11'500'000;
  o.measure_sensitivity = true;
  o.sensitivity = Small(0.125);
  const ConvertSummary sum = Convert(o);
  EXPECT_LE(sum.file_bytes, o.target_bytes);
  EXPECT_GT(sum.file_bytes, o.target_bytes - 150'000) << "the budget is used, not wasted";
  EXPECT_EQ(uint64_t(sum.file_bytes), fs::file_size(tmp.file("t/model.safetensors")));
  const auto cfg = nlohmann::json::parse(ReadFileToString(tmp.file("t/config.json")));
  const auto& q = cfg["quantization"];
  EXPECT_EQ(q["target_size_bytes"], o.target_bytes);
  ASSERT_TRUE(q["tensors"].contains("model.embed_tokens")) << "a 4.2M-weight bf16 embedding "
                                                              "cannot fit 11.5 MB";
  int with_alpha = 0;
  for (const auto& [n, t] : q["tensors"].items())
    with_alpha += t.contains("sensitivity") && t["sensitivity"].get<double>() > 0;
  EXPECT_EQ(with_alpha, 43) << "42 linears and the tied embedding";
  const std::vector<int32_t> ids = test::GoldenIds(o.model_dir);
  EXPECT_EQ(test::PrefillLogits(tmp.file("t"), ids).size(), ids.size() * 8192);

  o.out_dir = tmp.file("small");
  o.target_bytes = 5'000'000;  // below every tensor at its cheapest
  try {
    Convert(o);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("smallest possible file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.file("small")));
}

}  // namespace
}  // namespace tq
