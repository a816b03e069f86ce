// The forward pass agrees with itself: prefill in one chunk == in several chunks == token by
// token; DecodeBatch == separate Forward calls; an fp16 cache stays close to fp32; errors leave the
// cache as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

std::vector<int32_t> Prompt(int64_t n, int64_t vocab, int32_t salt) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 7919 + salt * 104729 + 13) % vocab));
  return t;
}

double MaxDiff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

class ConsistencyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { model_ = Model::Load(test::ModelDir(GetParam())); }
  std::unique_ptr<Model> model_;
};

TEST_P(ConsistencyTest, ChunkedAndTokenByTokenPrefillMatchOneChunk) {
  const int64_t vocab = model_->vocab_size(), n = 24;
  const auto tokens = Prompt(n, vocab, 1);
  const KvCacheOptions opts{.max_tokens = 64, .dtype = KvDType::kF32};
  // One chunk, all logits.
  auto c1 = model_->NewCache(opts);
  std::vector<float> all(size_t(n * vocab));
  model_->Forward(tokens, *c1, all.data(), true);
  // Chunks of 17, 1, 22: last-token logits of each chunk must match the rows of `all`.
  auto c2 = model_->NewCache(opts);
  std::vector<float> last(static_cast<size_t>(vocab));
  int64_t begin = 0;
  for (int64_t len : {9, 1, 14}) {
    model_->Forward(std::span(tokens).subspan(size_t(begin), size_t(len)), *c2, last.data());
    begin += len;
    EXPECT_LT(MaxDiff(last.data(), all.data() + (begin - 1) * vocab, vocab), 1e-4) << begin;
  }
  // Token by token, every position.
  auto c3 = model_->NewCache(opts);
  for (int64_t i = 0; i < n; ++i) {
    model_->Forward(std::span(tokens).subspan(size_t(i), 1), *c3, last.data());
    ASSERT_LT(MaxDiff(last.data(), all.data() + i * vocab, vocab), 1e-4) << "position " << i;
  }
  EXPECT_EQ(c3->size(), n);
}

TEST_P(ConsistencyTest, DecodeBatchMatchesSeparateForwards) {
  const int64_t vocab = model_->vocab_size();
  const KvCacheOptions opts{.max_tokens = 64, .dtype = KvDType::kF32};
  std::vector<std::unique_ptr<KvCache>> a, b;
  std::vector<int32_t> next;
  std::vector<float> want(size_t(3 * vocab));
  for (int s = 0; s < 3; ++s) {
    a.push_back(model_->NewCache(opts));
    b.push_back(model_->NewCache(opts));
    const auto prompt = Prompt(5 + 6 * s, vocab, s + 2);  // different lengths and positions
    std::vector<float> tmp(static_cast<size_t>(vocab));
    model_->Forward(prompt, *a.back(), tmp.data());
    model_->Forward(prompt, *b.back(), tmp.data());
    next.push_back(int32_t((s * 31 + 5) % vocab));
    model_->Forward(std::span(&next.back(), 1), *a.back(), want.data() + s * vocab);
  }
  std::vector<KvCache*> caches = {b[0].get(), b[1].get(), b[2].get()};
  std::vector<float> got(size_t(3 * vocab));
  model_->DecodeBatch(next, caches, got.data());
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(b[size_t(s)]->size(), a[size_t(s)]->size());
    EXPECT_LT(MaxDiff(got.data() + s * vocab, want.data() + s * vocab, vocab), 1e-4) << s;
  }
  // The same cache twice is refused.
  std::vector<KvCache*> dup = {b[0].get(), b[0].get()};
  EXPECT_THROW(model_->DecodeBatch(std::span(next).first(2), dup, got.data()), Error);
}

// The server's step: decode rows and prompt chunks of several sequences in one pass.
TEST_P(ConsistencyTest, ForwardBatchMatchesSeparateForwards) {
  const int64_t vocab = model_->vocab_size();
  const KvCacheOptions opts{.max_tokens = 64, .dtype = KvDType::kF32};
  // Sequence 0 decodes one token after a 9-token prompt; 1 prefills a 12-token prompt from
  // empty (logits wanted); 2 prefills 7 more tokens after 5 (no logits: the prompt goes on).
  const auto p0 = Prompt(9, vocab, 1), p1 = Prompt(12, vocab, 2), p2 = Prompt(12, vocab, 3);
  std::vector<std::unique_ptr<KvCache>> a, b;
  for (int s = 0; s < 3; ++s) {
    a.push_back(model_->NewCache(opts));
    b.push_back(model_->NewCache(opts));
  }
  std::vector<float> tmp(static_cast<size_t>(vocab)), want(static_cast<size_t>(2 * vocab));
  for (auto* c : {a[0].get(), b[0].get()}) model_->Forward(p0, *c, tmp.data());
  for (auto* c : {a[2].get(), b[2].get()}) model_->Forward(std::span(p2).first(5), *c, tmp.data());
  const int32_t next = 77 % int32_t(vocab);
  model_->Forward(std::span(&next, 1), *a[0], want.data());
  model_->Forward(p1, *a[1], want.data() + vocab);
  model_->Forward(std::span(p2).subspan(5), *a[2], tmp.data());

  std::vector<int32_t> tokens = {next};
  tokens.insert(tokens.end(), p1.begin(), p1.end());
  tokens.insert(tokens.end(), p2.begin() + 5, p2.end());
  const Model::BatchPart parts[] = {
      {b[0].get(), 1, true}, {b[1].get(), 12, true}, {b[2].get(), 7, false}};
  std::vector<float> got(size_t(2 * vocab));
  model_->ForwardBatch(tokens, parts, got.data());
  for (int s = 0; s < 3; ++s) EXPECT_EQ(b[size_t(s)]->size(), a[size_t(s)]->size()) << s;
  EXPECT_LT(MaxDiff(got.data(), want.data(), vocab), 1e-4);
  EXPECT_LT(MaxDiff(got.data() + vocab, want.data() + vocab, vocab), 1e-4);
  // The next token after the batch sees the same cache contents.
  std::vector<float> after_a(static_cast<size_t>(vocab)), after_b(static_cast<size_t>(vocab));
  model_->Forward(std::span(&next, 1), *a[2], after_a.data());
  model_->Forward(std::span(&next, 1), *b[2], after_b.data());
  EXPECT_LT(MaxDiff(after_a.data(), after_b.data(), vocab), 1e-4);

  // Bad batches throw before any cache changes.
  const int64_t before = b[0]->size();
  const Model::BatchPart dup[] = {{b[0].get(), 1, true}, {b[0].get(), 1, true}};
  EXPECT_THROW(model_->ForwardBatch(std::span(tokens).first(2), dup, got.data()), Error);
  const Model::BatchPart short_parts[] = {{b[0].get(), 1, true}, {b[1].get(), 5, true}};
  EXPECT_THROW(model_->ForwardBatch(tokens, short_parts, got.data()), Error);
  const Model::BatchPart overflow[] = {{b[0].get(), 1, true}, {b[1].get(), 60, true}};
  std::vector<int32_t> many(61, 1);
  EXPECT_THROW(model_->ForwardBatch(many, overflow, got.data()), Error);
  EXPECT_EQ(b[0]->size(), before);
}

TEST_P(ConsistencyTest, Fp16AndBf16CachesStayCloseToFp32) {
  const int64_t vocab = model_->vocab_size(), n = 48;
  const auto tokens = Prompt(n, vocab, 3);
  std::vector<float> ref(size_t(n * vocab)), got(ref.size());
  auto c32 = model_->NewCache({.max_tokens = n, .dtype = KvDType::kF32});
  model_->Forward(tokens, *c32, ref.data(), true);
  for (KvDType dt : {KvDType::kF16, KvDType::kBF16}) {
    auto c = model_->NewCache({.max_tokens = n, .dtype = dt});
    model_->Forward(tokens, *c, got.data(), true);
    double sum = 0;
    for (size_t i = 0; i < ref.size(); ++i) sum += std::fabs(got[i] - ref[i]);
    const double max_diff = MaxDiff(got.data(), ref.data(), n * vocab);
    const double mean_diff = sum / double(ref.size());
    // bf16 keys can flip an MoE routing decision, so only its mean is bounded tightly.
    if (dt == KvDType::kF16) {
      EXPECT_LT(max_diff, 2e-2);
    }
    EXPECT_LT(mean_diff, dt == KvDType::kF16 ? 2e-3 : 2e-2) << KvDTypeName(dt);
    EXPECT_GT(max_diff, 0.0) << "the cache dtype should make some difference";
  }
}

TEST_P(ConsistencyTest, ErrorsLeaveTheCacheUnchanged) {
  const int64_t vocab = model_->vocab_size();
  auto cache = model_->NewCache({.max_tokens = 8});
  std::vector<float> logits(size_t(8 * vocab));
  const auto tokens = Prompt(5, vocab, 4);
  model_->Forward(tokens, *cache, logits.data());
  EXPECT_THROW(model_->Forward(tokens, *cache, logits.data()), Error);  // 5 + 5 > 8
  EXPECT_EQ(cache->size(), 5);
  const std::vector<int32_t> bad = {1, int32_t(vocab)};
  EXPECT_THROW(model_->Forward(bad, *cache, logits.data()), Error);
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(model_->Forward(negative, *cache, logits.data()), Error);
  EXPECT_THROW(model_->Forward(std::span<const int32_t>(), *cache, logits.data()), Error);
  EXPECT_EQ(cache->size(), 5);
  // A cache of another geometry is refused.
  KvLayout other = model_->kv_layout();
  other.num_layers += 1;
  other.window.push_back(0);
  auto foreign = MakeKvCache(other, {});
  EXPECT_THROW(model_->Forward(tokens, *foreign, logits.data()), Error);
}

TEST_P(ConsistencyTest, WeightBytesCountEveryTensorOnce) {
  // Both reference models tie the head to the embedding and store nothing else.
  const auto headers = Checkpoint::ReadHeaders(test::ModelDir(GetParam()));
  int64_t total = 0;
  for (const auto& t : headers) total += int64_t(t.nbytes);
  const ModelConfig& c = model_->config();
  // Norm vectors are held in fp32 (bf16 on disk): count their extra bytes.
  int64_t norm_elems = c.hidden_size * (2 * c.num_layers + 1);
  if (c.qk_norm) norm_elems += 2 * c.head_dim * c.num_layers;
  EXPECT_EQ(model_->WeightBytes(), total + 2 * norm_elems);
}

INSTANTIATE_TEST_SUITE_P(Models, ConsistencyTest,
                         ::testing::Values("tq-llama-21m", "tq-qwen3moe-17m"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace tq
