// `convert` of the newer families (../shared/models/arch/): every family that runs converts to
// 4 bits and with --budget-bpw 3.5, and its packed forward equals the forward of its explicitly
// dequantized twin (fused phi3 projections stay fused and are sliced packed; gemma's plus-one
// norms, sinks and biases stay float).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert_helpers.h"
#include "kernels/cpu/isa.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

class FamilyConvert : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyConvert, PackedForwardEqualsDequantizedForward) {
  test::TempDir tmp;
  ConvertOptions o = test::Options(test::ModelDir("arch/tq-arch-" + GetParam()), "", 4);
  o.out_dir = tmp.file("q");
  Convert(o);
  WriteDequantizedCheckpoint(o.out_dir, tmp.file("dq"));
  const std::vector<int32_t> ids = test::GoldenIds(o.model_dir);
  // The float kernels: the packed model matches its dequantized twin to rounding.
  const kernels::cpu::Isa saved = kernels::cpu::ActiveIsa();
  kernels::cpu::SetActiveIsa(kernels::cpu::Isa::kScalar);
  EXPECT_LT(test::RelativeMaxError(test::PrefillLogits(o.out_dir, ids),
                                   test::PrefillLogits(tmp.file("dq"), ids)),
            1e-4);
  EXPECT_LT(test::RelativeMaxError(test::DecodeLogits(o.out_dir, ids),
                                   test::DecodeLogits(tmp.file("dq"), ids)),
            1e-4);
  kernels::cpu::SetActiveIsa(saved);
}

TEST_P(FamilyConvert, BudgetConvertLoadsAndRuns) {
  test::TempDir tmp;
  ConvertOptions o = test::Options(test::ModelDir("arch/tq-arch-" + GetParam()), "", 4);
  o.out_dir = tmp.file("b");
  o.budget_bpw = 3.5;
  Convert(o);
  const std::vector<int32_t> ids = test::GoldenIds(o.model_dir);
  const std::vector<float> logits = test::PrefillLogits(o.out_dir, ids);
  ASSERT_FALSE(logits.empty());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyConvert,
                         ::testing::Values("gemma2", "gemma3-text", "phi3", "qwen2-moe", "gpt-oss",
                                           "deepseek-v2", "deepseek-v3", "qwen3-next",
                                           "qwen3-5-text", "qwen3-5-moe-text", "nemotron-h",
                                           "gemma4-text"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace tq
