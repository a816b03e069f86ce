// End-to-end: fp32 logits and greedy continuations of the shared reference models against the
// Hugging Face values in golden.safetensors.
#include "testutil/golden.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "io/safetensors.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using test::Golden;
using test::LoadGolden;

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, Fp32LogitsMatchHuggingFace) {
  const Golden g = LoadGolden(GetParam());
  auto model = Model::Load(test::ModelDir(GetParam()));
  const int64_t vocab = model->vocab_size(), t = int64_t(g.input_ids.size());
  ASSERT_EQ(int64_t(g.logits.size()), t * vocab);
  auto cache = model->NewCache({.max_tokens = 256, .dtype = KvDType::kF32});
  std::vector<float> logits(size_t(t * vocab));
  model->Forward(g.input_ids, *cache, logits.data(), /*all_logits=*/true);
  EXPECT_EQ(cache->size(), t);
  double max_err = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    max_err = std::max(max_err, double(std::fabs(logits[i] - g.logits[i])));
  EXPECT_LT(max_err, 2e-3) << GetParam();
  RecordProperty("max_abs_err", std::to_string(max_err));
  std::printf("%s: max |logit - golden| = %.3g over %lld tokens\n", GetParam().c_str(), max_err,
              (long long)t);
}

TEST_P(GoldenTest, GreedyDecodeReproducesFirst16Ids) {
  const Golden g = LoadGolden(GetParam());
  auto model = Model::Load(test::ModelDir(GetParam()));
  const int64_t vocab = model->vocab_size();
  auto cache = model->NewCache({.max_tokens = 256, .dtype = KvDType::kF32});
  std::vector<float> logits(static_cast<size_t>(vocab));
  model->Forward(g.input_ids, *cache, logits.data());
  std::vector<int32_t> out;
  for (int i = 0; i < 16; ++i) {
    const int32_t next = int32_t(kernels::Argmax(logits.data(), vocab));
    out.push_back(next);
    model->Forward(std::span<const int32_t>(&next, 1), *cache, logits.data());
  }
  EXPECT_EQ(out, std::vector<int32_t>(g.greedy_ids.begin(), g.greedy_ids.begin() + 16));
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest, ::testing::Values("tq-llama-21m", "tq-qwen3moe-17m"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace tq
