// The perplexity protocol on a short run, against a naive computation: token-by-token decoding
// from an empty cache per window, log-softmax written out separately.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"

namespace tq {
namespace {

double NaivePerplexity(Model& model, std::span<const int32_t> ids, int64_t ctx, int64_t* count) {
  const int64_t vocab = model.vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab));
  double sum = 0;
  *count = 0;
  for (size_t begin = 0; begin < ids.size(); begin += size_t(ctx)) {
    const size_t end = std::min(ids.size(), begin + size_t(ctx));
    auto cache = model.NewCache(KvCacheOptions{ctx, KvDType::kF32});
    for (size_t i = begin; i + 1 < end; ++i) {
      model.Forward(ids.subspan(i, 1), *cache, logits.data());
      long double z = 0;
      for (float l : logits) z += std::exp((long double)l);
      sum += double(std::log(z) - (long double)logits[size_t(ids[i + 1])]);
      ++*count;
    }
  }
  return std::exp(sum / double(*count));
}

TEST(Perplexity, NegLogLikelihoodIsLogSoftmax) {
  const float l[] = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(NegLogLikelihood(l, 3, 2), std::log(z) - 3.0, 1e-12);
  // Large logits do not overflow.
  const float big[] = {1000.0f, 1000.0f};
  EXPECT_NEAR(NegLogLikelihood(big, 2, 0), std::log(2.0), 1e-12);
}

TEST(Perplexity, LogSumExpOverAVocabularyAgreesWithDouble) {
  std::vector<float> x(50021);  // not a multiple of the 256-entry blocks
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i) * 0.37) * 12.0);
  x[777] = -INFINITY;  // a masked entry
  double mx = -INFINITY, sum = 0;
  for (float v : x) mx = std::max(mx, double(v));
  for (float v : x) sum += std::exp(double(v) - mx);
  const double want = std::log(sum) + mx;
  EXPECT_NEAR(LogSumExp(x.data(), int64_t(x.size())), want, 1e-6 * std::abs(want));
  EXPECT_NEAR(NegLogLikelihood(x.data(), int64_t(x.size()), 5), want - double(x[5]), 1e-6);
}

TEST(Perplexity, ProtocolMatchesNaiveComputation) {
  const std::string dir = test::ModelDir("tq-qwen3moe-17m");  // the faster of the two
  auto model = Model::Load(dir);
  auto tok = Tokenizer::Load(dir);
  const std::string text = ReadFileToString(test::EvalFile("eval_other.txt"));
  const std::vector<int32_t> all = tok->Encode(text, false);
  ASSERT_GT(all.size(), 2000u);
  // 300 tokens in windows of 96: three full windows and a short one of 12.
  PerplexityOptions o;
  o.ctx = 96;
  o.max_tokens = 300;
  o.kv.dtype = KvDType::kF32;
  o.progress = false;
  const PerplexityResult r = ComputePerplexity(*model, all, o);
  EXPECT_EQ(r.windows, 4);
  EXPECT_EQ(r.input_tokens, 300);
  EXPECT_EQ(r.tokens, 300 - 4);
  int64_t count = 0;
  const double naive =
      NaivePerplexity(*model, std::span<const int32_t>(all.data(), 300), 96, &count);
  EXPECT_EQ(count, r.tokens);
  EXPECT_NEAR(r.ppl / naive, 1.0, 1e-4) << r.ppl << " vs " << naive;
  EXPECT_NEAR(std::exp(r.nll), r.ppl, 1e-9 * r.ppl);
  // Computing logits in chunks of rows gives the same result.
  o.logit_rows = 40;
  EXPECT_NEAR(ComputePerplexity(*model, all, o).ppl / r.ppl, 1.0, 1e-5);
}

TEST(Perplexity, RejectsBadInput) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  auto model = Model::Load(dir);
  PerplexityOptions o;
  o.progress = false;
  const std::vector<int32_t> one = {5};
  EXPECT_THROW(ComputePerplexity(*model, one, o), Error);
  const std::vector<int32_t> bad = {5, 1 << 20, 7};
  EXPECT_THROW(ComputePerplexity(*model, bad, o), Error);
  o.ctx = 1;
  const std::vector<int32_t> ok = {5, 6, 7};
  EXPECT_THROW(ComputePerplexity(*model, ok, o), Error);
}

}  // namespace
}  // namespace tq
