// The newer families against Hugging Face (../shared/models/arch/: tiny random-weight
// checkpoints written by transformers 5.17 with fp32 golden logits). For every family that runs:
// the logits of one pass from an empty fp32 cache equal the golden within 2e-3 of the logits'
// scale (max |golden logit|), the 24 greedy ids equal, the perplexity protocol gives the golden
// logits' perplexity, and chunked prefill, DecodeBatch and prefix reuse give the logits of the
// one pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cuda_emu/cuda_emu.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "testutil/golden.h"
#include "testutil/gpu.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using test::Golden;

std::string Dir(const std::string& family) { return "arch/tq-arch-" + family; }

std::vector<int32_t> Ids(const std::string& family, const std::string& tensor) {
  auto f =
      SafetensorsFile::Open(test::RequireFile(test::ModelDir(Dir(family)) + "/golden.safetensors"));
  const TensorView t = f->View(tensor);
  return std::vector<int32_t>(t.as<int32_t>(), t.as<int32_t>() + t.numel());
}

// Largest |a - b| relative to the largest |b| (the logits' scale).
double RelErr(const float* a, const float* b, size_t count) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < count; ++i) {
    err = std::max(err, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return err / std::max(scale, 1e-30);
}

constexpr double kTol = 2e-3;

class ArchGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = test::LoadGolden(Dir(GetParam()));
    model_ = Model::Load(test::ModelDir(Dir(GetParam())), {.device = "cpu"});
    vocab_ = model_->vocab_size();
  }
  std::unique_ptr<KvCache> Cache() {
    return model_->NewCache({.max_tokens = 128, .dtype = KvDType::kF32});
  }
  Golden golden_;
  std::unique_ptr<Model> model_;
  int64_t vocab_ = 0;
};

TEST_P(ArchGolden, Fp32LogitsMatchHuggingFace) {
  const int64_t t = int64_t(golden_.input_ids.size());
  ASSERT_EQ(int64_t(golden_.logits.size()), t * vocab_);
  auto cache = Cache();
  std::vector<float> logits(size_t(t * vocab_));
  model_->Forward(golden_.input_ids, *cache, logits.data(), /*all_logits=*/true);
  const double rel = RelErr(logits.data(), golden_.logits.data(), logits.size());
  std::printf("%s: max |logit - golden| / max |golden| = %.3g over %lld tokens\n",
              GetParam().c_str(), rel, (long long)t);
  EXPECT_LT(rel, kTol) << GetParam();
}

TEST_P(ArchGolden, Fp32LogitsMatchOnTheRefBackend) {
  auto model = Model::Load(test::ModelDir(Dir(GetParam())), {.device = "ref"});
  const int64_t t = int64_t(golden_.input_ids.size());
  auto cache = model->NewCache({.max_tokens = 128, .dtype = KvDType::kF32});
  std::vector<float> logits(size_t(t * vocab_));
  model->Forward(golden_.input_ids, *cache, logits.data(), /*all_logits=*/true);
  EXPECT_LT(RelErr(logits.data(), golden_.logits.data(), logits.size()), kTol) << GetParam();
}

// The CUDA backend (the GPU, or its sources on the host emulator): one pass's logits within the
// same bound of the golden (prompts of more than 8 tokens take the bf16 tensor-core GEMMs, the
// arch checkpoints are bf16 so x is split into two bf16 parts: fp32-grade), and the 24 greedy
// ids (the first `greedy` of them on the emulator, whose every CUDA thread is a fiber) through the
// 1-token kernels.
void ExpectGoldenOn(const std::string& family, const std::string& device, const Golden& golden,
                    int64_t vocab, size_t greedy) {
  auto model = Model::Load(test::ModelDir(Dir(family)), {.device = device});
  const int64_t t = int64_t(golden.input_ids.size());
  {
    auto cache = model->NewCache({.max_tokens = 128, .dtype = KvDType::kF32});
    std::vector<float> logits(size_t(t * vocab));
    model->Forward(golden.input_ids, *cache, logits.data(), /*all_logits=*/true);
    const double rel = RelErr(logits.data(), golden.logits.data(), logits.size());
    std::printf("%s on %s: max |logit - golden| / max |golden| = %.3g\n", family.c_str(),
                device.c_str(), rel);
    EXPECT_LT(rel, kTol) << family << " on " << device;
  }
  const std::vector<int32_t> prompt = Ids(family, "greedy_prompt_ids");
  auto cache = model->NewCache({.max_tokens = 128, .dtype = KvDType::kF32});
  std::vector<float> logits(static_cast<size_t>(vocab));
  model->Forward(prompt, *cache, logits.data());
  std::vector<int32_t> out;
  greedy = std::min(greedy, golden.greedy_ids.size());
  for (size_t i = 0; i < greedy; ++i) {
    const int32_t next = int32_t(kernels::Argmax(logits.data(), vocab));
    out.push_back(next);
    if (i + 1 < greedy) model->Forward(std::span<const int32_t>(&next, 1), *cache, logits.data());
  }
  const std::vector<int32_t> want(golden.greedy_ids.begin(), golden.greedy_ids.begin() + greedy);
  EXPECT_EQ(out, want) << family << " on " << device;
}

TEST_P(ArchGolden, LogitsAndGreedyIdsOnTheEmulatedCudaBackend) {
  if (!kernels::EmulatedCudaDevice())
    GTEST_SKIP() << "the CUDA emulator's fibers (ucontext) are not run under ASan";
  ExpectGoldenOn(GetParam(), "emu", golden_, vocab_, 4);
}

TEST_P(ArchGolden, LogitsAndGreedyIdsOnTheGpu) {
  TQ_REQUIRE_GPU();
  ExpectGoldenOn(GetParam(), "cuda", golden_, vocab_, golden_.greedy_ids.size());
}

TEST_P(ArchGolden, GreedyDecodeReproducesThe24Ids) {
  const std::vector<int32_t> prompt = Ids(GetParam(), "greedy_prompt_ids");
  auto cache = Cache();
  std::vector<float> logits(static_cast<size_t>(vocab_));
  model_->Forward(prompt, *cache, logits.data());
  std::vector<int32_t> out;
  for (size_t i = 0; i < golden_.greedy_ids.size(); ++i) {
    const int32_t next = int32_t(kernels::Argmax(logits.data(), vocab_));
    out.push_back(next);
    model_->Forward(std::span<const int32_t>(&next, 1), *cache, logits.data());
  }
  EXPECT_EQ(out, golden_.greedy_ids) << GetParam();
}

// Chunked prefill (chunks of 5, across the sliding windows), token-by-token decode through
// DecodeBatch beside another sequence, and prefix reuse (truncate, then run the rest) all give
// the logits of one pass, up to fp32 summation order: within 1e-5 of scale, or twice what the
// one pass differs from the golden where a family is that ill-conditioned (gemma4_text: scale-1
// attention over q/k-normed heads of 512 makes its logits move by 1-3e-5 of scale under any
// change of fp32 rounding; the golden itself is 2.7e-5 from a float64 forward). A wrong window,
// position or cached row moves them by orders of magnitude more.
TEST_P(ArchGolden, ChunksDecodeBatchAndPrefixReuseEqualOnePass) {
  const std::vector<int32_t>& ids = golden_.input_ids;
  const int64_t t = int64_t(ids.size());
  std::vector<float> one(size_t(t * vocab_));
  {
    auto cache = Cache();
    model_->Forward(ids, *cache, one.data(), true);
  }
  const double tol = std::max(1e-5, 2 * RelErr(one.data(), golden_.logits.data(), one.size()));
  auto row = [&](int64_t i) { return one.data() + i * vocab_; };
  {  // chunks of 5
    auto cache = Cache();
    std::vector<float> got(size_t(t * vocab_));
    for (int64_t b = 0; b < t; b += 5) {
      const int64_t c = std::min<int64_t>(5, t - b);
      model_->Forward(std::span<const int32_t>(ids).subspan(size_t(b), size_t(c)), *cache,
                      got.data() + b * vocab_, true);
    }
    EXPECT_LT(RelErr(got.data(), one.data(), got.size()), tol) << "chunked prefill";
  }
  {  // DecodeBatch: sequence a one token at a time from position 12, sequence b from 20
    auto a = Cache(), b = Cache();
    std::vector<float> tmp(size_t(t * vocab_)), got(size_t(2 * vocab_));
    model_->Forward(std::span<const int32_t>(ids).first(12), *a, tmp.data());
    model_->Forward(std::span<const int32_t>(ids).first(20), *b, tmp.data());
    double err = 0;
    for (int64_t s = 0; s < 10; ++s) {
      const int32_t toks[] = {ids[size_t(12 + s)], ids[size_t(20 + s)]};
      KvCache* caches[] = {a.get(), b.get()};
      model_->DecodeBatch(toks, caches, got.data());
      err = std::max(err, RelErr(got.data(), row(12 + s), size_t(vocab_)));
      err = std::max(err, RelErr(got.data() + vocab_, row(20 + s), size_t(vocab_)));
    }
    EXPECT_LT(err, tol) << "DecodeBatch";
  }
  {  // prefix reuse: run 24 then the rest, keep the first 24 (or what the cache allows: sliding
     // windows, recurrent-state snapshots at prompt-chunk ends), run the rest again
    auto cache = Cache();
    std::vector<float> got(size_t(t * vocab_));
    model_->Forward(std::span<const int32_t>(ids).first(24), *cache, got.data(), true);
    model_->Forward(std::span<const int32_t>(ids).subspan(24), *cache, got.data() + 24 * vocab_,
                    true);
    const int64_t keep = std::max<int64_t>(cache->ReusablePrefix(24), cache->MinTruncate());
    ASSERT_LT(keep, t);
    if (cache->num_recurrent() > 0) EXPECT_EQ(keep, 24) << "the snapshot at the first chunk's end";
    cache->Truncate(keep);
    model_->Forward(std::span<const int32_t>(ids).subspan(size_t(keep)), *cache,
                    got.data() + keep * vocab_, true);
    EXPECT_LT(RelErr(got.data(), one.data(), got.size()), tol) << "prefix reuse";
  }
}

// The perplexity protocol (runtime/perplexity.h: ctx 32, 32 tokens, fp32 cache) equals the
// perplexity the golden logits imply within 0.1% (what `turboquant perplexity` prints).
TEST_P(ArchGolden, PerplexityEqualsTheGoldenLogitsPerplexity) {
  const std::vector<int32_t>& ids = golden_.input_ids;
  const int64_t t = int64_t(ids.size());
  double nll = 0;
  for (int64_t i = 0; i + 1 < t; ++i)
    nll += NegLogLikelihood(golden_.logits.data() + i * vocab_, vocab_, ids[size_t(i + 1)]);
  const double want = std::exp(nll / double(t - 1));
  PerplexityOptions po;
  po.ctx = 32;
  po.max_tokens = 32;
  po.kv.dtype = KvDType::kF32;
  po.progress = false;
  const PerplexityResult r = ComputePerplexity(*model_, ids, po);
  EXPECT_EQ(r.tokens, t - 1);
  EXPECT_NEAR(r.ppl / want, 1.0, 1e-3) << GetParam() << ": " << r.ppl << " vs " << want;
}

// A plain f16 cache (the default) runs too and stays close to the fp32 one.
TEST_P(ArchGolden, F16CacheStaysClose) {
  const int64_t t = int64_t(golden_.input_ids.size());
  auto cache = model_->NewCache({.max_tokens = 128, .dtype = KvDType::kF16});
  std::vector<float> logits(size_t(t * vocab_));
  model_->Forward(golden_.input_ids, *cache, logits.data(), true);
  EXPECT_LT(RelErr(logits.data(), golden_.logits.data(), logits.size()), 2e-2) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Families, ArchGolden,
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
