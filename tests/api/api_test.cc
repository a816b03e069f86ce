// The public C++ API (include/turboquant/) on the shared llama: the same ids, text and numbers as
// the engine paths the CLI takes; streaming, cancellation, errors with the engine's messages.
#include <gtest/gtest.h>
#include <turboquant/turboquant.h>

#include <algorithm>
#include <cmath>

#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"

namespace {

using turboquant::Error;

std::string Llama() { return tq::test::ModelDir("tq-llama-21m"); }

std::vector<int32_t> GoldenInts(const std::string& name) {
  const auto f = tq::SafetensorsFile::Open(tq::test::RequireFile(Llama() + "/golden.safetensors"));
  const tq::TensorView v = f->View(name);
  return {v.as<int32_t>(), v.as<int32_t>() + v.numel()};
}

TEST(Api, GreedyGenerationMatchesTheGoldenContinuation) {
  auto m = turboquant::Model::Load(Llama());
  EXPECT_EQ(m->architecture(), "LlamaForCausalLM");
  EXPECT_EQ(m->source_format(), "");
  turboquant::GenerateOptions o;
  o.temperature = 0;
  o.max_tokens = 8;
  std::string streamed;
  const auto r = m->GenerateIds(GoldenInts("input_ids"), o, [&](std::string_view p) {
    streamed += p;
    return true;
  });
  const std::vector<int32_t> golden = GoldenInts("greedy_ids");
  ASSERT_EQ(r.tokens.size(), 8u);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(golden.begin(), golden.begin() + 8));
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.finish_reason, "length");
}

TEST(Api, SeededSamplingIsReproducibleAndCancellable) {
  auto m = turboquant::Model::Load(Llama());
  turboquant::GenerateOptions o;
  o.temperature = 0.8f;
  o.seed = 42;
  o.max_tokens = 24;
  const auto a = m->Generate("The dictionary defines", o);
  const auto b = m->Generate("The dictionary defines", o);
  EXPECT_EQ(a.tokens, b.tokens);
  int pieces = 0;
  const auto c = m->Generate("The dictionary defines", o, [&](std::string_view) {
    return ++pieces < 3;  // cancel at the third piece
  });
  EXPECT_EQ(c.finish_reason, "cancelled");
  EXPECT_LT(c.tokens.size(), a.tokens.size());
}

TEST(Api, TokenizeChatScoreAndPerplexityAgreeWithTheEngine) {
  auto m = turboquant::Model::Load(Llama());
  const auto tok = tq::Tokenizer::Load(Llama());
  const std::string text = "A word is a unit of language that carries meaning.";
  EXPECT_EQ(m->Tokenize(text), tok->Encode(text, true));
  EXPECT_EQ(m->Detokenize(m->Tokenize(text, false)), tok->Decode(tok->Encode(text, false)));
  EXPECT_NE(m->ApplyChatTemplate({{"user", "hi"}}).find("hi"), std::string::npos);

  const turboquant::Score s = m->ScoreText(text);
  ASSERT_EQ(s.logprobs.size() + 1, s.tokens.size());
  double sum = 0;
  for (float lp : s.logprobs) {
    EXPECT_LE(lp, 0.0f);
    sum += lp;
  }
  EXPECT_NEAR(sum, s.total, 1e-3);
  // One window covering the text: the perplexity is exp(-mean logprob).
  EXPECT_NEAR(m->Perplexity(text, 512), std::exp(-s.total / double(s.logprobs.size())), 1e-3);

  const std::string eval =
      tq::ReadFileToString(tq::test::RequireFile(tq::test::EvalFile("eval_other.txt")));
  auto engine = tq::Model::Load(Llama());
  tq::PerplexityOptions po;
  po.max_tokens = 2048;
  po.progress = false;
  const double want = tq::ComputePerplexity(*engine, tok->Encode(eval, false), po).ppl;
  EXPECT_DOUBLE_EQ(m->Perplexity(eval, 512, 2048), want);
}

TEST(Api, ErrorsCarryTheEngineMessage) {
  try {
    turboquant::Model::Load("/nonexistent/model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kFailure);
    EXPECT_EQ(std::string(e.what()).rfind("[", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model"), std::string::npos) << e.what();
  }
  turboquant::LoadOptions lo;
  lo.device = "tpu";
  try {
    turboquant::Model::Load(Llama(), lo);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kUsage);
    EXPECT_NE(std::string(e.what()).find("device 'tpu'"), std::string::npos);
  }
  auto m = turboquant::Model::Load(Llama());
  turboquant::GenerateOptions o;
  o.top_p = 0;
  EXPECT_THROW(m->Generate("x", o), Error);
  EXPECT_THROW(m->ScoreText(""), Error);
}

// The embedding is the final hidden state: the LM head (tied to the embedding table here) applied
// to it gives the model's logits; pooled and normalized forms follow from the per-token rows.
TEST(Api, EmbeddingsAreTheFinalHiddenStateUnderTheLmHead) {
  auto m = turboquant::Model::Load(Llama());
  const std::vector<int32_t> ids = m->Tokenize("The sky over the harbour was grey.");
  const int64_t n = int64_t(ids.size()), d = m->hidden_size(), v = m->vocab_size();
  turboquant::EmbedOptions raw;
  raw.pooling = turboquant::Pooling::kNone;
  raw.normalize = false;
  const std::vector<float> h = m->EmbedIds(ids, raw);  // [n, d]
  ASSERT_EQ(int64_t(h.size()), n * d);
  const std::vector<float> logits = m->Logits(ids);  // [n, v]
  const auto ckpt = tq::Checkpoint::Open(Llama());
  const tq::TensorView table = ckpt->View("model.embed_tokens.weight");  // tied LM head [v, d]
  std::vector<float> w(size_t(v * d));
  tq::ToF32(table, w.data());
  double worst = 0, scale = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < v; ++k) {
      double dot = 0;
      for (int64_t j = 0; j < d; ++j) dot += double(h[size_t(t * d + j)]) * w[size_t(k * d + j)];
      worst = std::max(worst, std::fabs(dot - logits[size_t(t * v + k)]));
      scale = std::max(scale, std::fabs(dot));
    }
  EXPECT_LT(worst, 1e-4 * scale);

  turboquant::EmbedOptions last = raw;
  last.pooling = turboquant::Pooling::kLast;
  EXPECT_EQ(m->EmbedIds(ids, last), std::vector<float>(h.end() - d, h.end()));
  const std::vector<float> mean = m->Embed("The sky over the harbour was grey.");  // mean, unit
  ASSERT_EQ(int64_t(mean.size()), d);
  double norm = 0, dot = 0, mean_norm = 0;
  for (int64_t j = 0; j < d; ++j) {
    double s = 0;
    for (int64_t t = 0; t < n; ++t) s += h[size_t(t * d + j)];
    s /= double(n);
    norm += double(mean[size_t(j)]) * mean[size_t(j)];
    dot += s * mean[size_t(j)];
    mean_norm += s * s;
  }
  EXPECT_NEAR(norm, 1.0, 1e-5);
  EXPECT_NEAR(dot, std::sqrt(mean_norm), 1e-4 * std::sqrt(mean_norm));  // same direction
  EXPECT_THROW(m->EmbedIds(std::vector<int32_t>{}), Error);
  EXPECT_THROW(m->EmbedIds(std::vector<int32_t>(size_t(m->context() + 1), 1)), Error);
}

TEST(Api, PlanReportsTheVerdict) {
  turboquant::PlanRequest r;
  r.path = Llama();
  r.context = 2048;
  r.ram_gb = 64;
  const turboquant::PlanReport p = turboquant::Plan(r);
  EXPECT_EQ(p.verdict, "fits");
  EXPECT_GT(p.weights_bytes, 20'000'000);
  EXPECT_GT(p.kv_bytes, 0);
  EXPECT_GE(p.peak_bytes, p.weights_bytes + p.kv_bytes);
  r.context = 0;
  EXPECT_THROW(turboquant::Plan(r), Error);
}

}  // namespace
