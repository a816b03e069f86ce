// The plain KV cache: append / truncate / attend against a naive attention over the same keys and
// values kept in fp32 on the side.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace tq {
namespace {

KvLayout SmallLayout(int64_t window = 0) {
  KvLayout l;
  l.num_layers = 2;
  l.num_heads = 4;
  l.num_kv_heads = 2;
  l.head_dim = 24;
  l.scale = 1.0f / std::sqrt(24.0f);
  l.window = {0, window};
  return l;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Naive causal attention for queries at positions pos0.. over the side copies k/v
// ([positions, kv_heads, head_dim] fp32).
std::vector<float> Naive(const KvLayout& l, int64_t layer, const std::vector<float>& q, int64_t n,
                         int64_t pos0, const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t d = l.head_dim, group = l.num_heads / l.num_kv_heads;
  const int64_t w = l.window[size_t(layer)];
  std::vector<float> out(q.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = pos0 + i;
    for (int64_t h = 0; h < l.num_heads; ++h) {
      const int64_t kvh = h / group;
      std::vector<double> s;
      std::vector<int64_t> idx;
      for (int64_t t = 0; t <= pos; ++t) {
        if (w > 0 && pos - t >= w) continue;
        double dot = 0;
        for (int64_t j = 0; j < d; ++j)
          dot += double(q[size_t((i * l.num_heads + h) * d + j)]) *
                 k[size_t((t * l.num_kv_heads + kvh) * d + j)];
        s.push_back(dot * l.scale);
        idx.push_back(t);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < d; ++j) {
        double acc = 0;
        for (size_t u = 0; u < s.size(); ++u)
          acc += s[u] * v[size_t((idx[u] * l.num_kv_heads + kvh) * d + j)];
        out[size_t((i * l.num_heads + h) * d + j)] = float(acc / sum);
      }
    }
  }
  return out;
}

float Round(float x, KvDType t) {
  if (t == KvDType::kF16) return F16ToF32(F32ToF16(x));
  if (t == KvDType::kBF16) return Bf16ToF32(F32ToBf16(x));
  return x;
}

class KvCacheTest : public ::testing::TestWithParam<KvDType> {};

TEST_P(KvCacheTest, AppendTruncateAttendMatchNaive) {
  const KvDType dt = GetParam();
  const KvLayout layout = SmallLayout(/*window=*/5);
  auto cache = MakeKvCache(layout, {.max_tokens = 64, .dtype = dt});
  EXPECT_EQ(cache->capacity(), 64);
  std::mt19937 rng(7);
  const int64_t width = layout.num_kv_heads * layout.head_dim;
  std::vector<std::vector<float>> side_k(2), side_v(2);  // per layer, fp32 copies (rounded)
  auto step = [&](int64_t n) {
    const int64_t pos0 = cache->size();
    for (int64_t l = 0; l < 2; ++l) {
      auto k = Random(size_t(n * width), rng), v = Random(size_t(n * width), rng);
      cache->Append(l, k.data(), v.data(), n);
      side_k[size_t(l)].resize(size_t(pos0 * width));
      side_v[size_t(l)].resize(size_t(pos0 * width));
      for (float x : k) side_k[size_t(l)].push_back(Round(x, dt));
      for (float x : v) side_v[size_t(l)].push_back(Round(x, dt));
      auto q = Random(size_t(n * layout.num_heads * layout.head_dim), rng);
      std::vector<float> got(q.size());
      cache->Attend(l, q.data(), n, got.data());
      const auto want = Naive(layout, l, q, n, pos0, side_k[size_t(l)], side_v[size_t(l)]);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4) << "layer " << l << " pos0 " << pos0 << " i " << i;
    }
    cache->Commit(n);
  };
  step(7);
  step(1);
  step(13);
  EXPECT_EQ(cache->size(), 21);
  cache->Truncate(9);  // drop a suffix, then continue from position 9
  EXPECT_EQ(cache->size(), 9);
  step(3);
  step(1);
  EXPECT_EQ(cache->size(), 13);
  const int64_t elem = dt == KvDType::kF32 ? 4 : 2;
  EXPECT_EQ(cache->BytesPerToken(), 2 * 2 * width * elem);
}

INSTANTIATE_TEST_SUITE_P(DTypes, KvCacheTest,
                         ::testing::Values(KvDType::kF16, KvDType::kBF16, KvDType::kF32));

TEST(KvCache, OverflowAndBadArgumentsThrow) {
  auto cache = MakeKvCache(SmallLayout(), {.max_tokens = 4});
  std::vector<float> kv(5 * 48, 0.5f), q(5 * 96, 0.1f), out(q.size());
  EXPECT_THROW(cache->Append(0, kv.data(), kv.data(), 5), Error);
  EXPECT_THROW(cache->Append(2, kv.data(), kv.data(), 1), Error);
  EXPECT_THROW(cache->Append(-1, kv.data(), kv.data(), 1), Error);
  cache->Append(0, kv.data(), kv.data(), 4);
  cache->Append(1, kv.data(), kv.data(), 4);
  cache->Commit(4);
  EXPECT_THROW(cache->Commit(1), Error);
  EXPECT_THROW(cache->Truncate(5), Error);
  EXPECT_THROW(cache->Truncate(-1), Error);
  EXPECT_THROW(cache->Attend(0, q.data(), 1, out.data()), Error);  // would read position 4
  KvLayout bad = SmallLayout();
  bad.num_kv_heads = 3;
  EXPECT_THROW(MakeKvCache(bad, {}), Error);
  bad = SmallLayout();
  bad.window = {0};
  EXPECT_THROW(MakeKvCache(bad, {}), Error);
  EXPECT_THROW(MakeKvCache(SmallLayout(), {.max_tokens = 0}), Error);
}

TEST(KvCache, AttentionOverEqualKeysAveragesValues) {
  // Keys all equal -> uniform weights -> the output is the mean of the values.
  KvLayout l = SmallLayout();
  auto cache = MakeKvCache(l, {.max_tokens = 8, .dtype = KvDType::kF32});
  const int64_t width = l.num_kv_heads * l.head_dim;
  std::vector<float> k(static_cast<size_t>(width), 0.25f), v(static_cast<size_t>(width));
  for (int64_t t = 0; t < 3; ++t) {
    std::fill(v.begin(), v.end(), float(t + 1));
    cache->Append(0, k.data(), v.data(), 1);
    cache->Append(1, k.data(), v.data(), 1);
    cache->Commit(1);
  }
  std::vector<float> q(size_t(l.num_heads * l.head_dim), 1.0f), out(q.size());
  std::fill(v.begin(), v.end(), 4.0f);
  cache->Append(0, k.data(), v.data(), 1);
  cache->Attend(0, q.data(), 1, out.data());
  for (float x : out) EXPECT_NEAR(x, 2.5f, 1e-6);  // mean of 1, 2, 3, 4
}

TEST(KvCache, FillSyntheticAndDTypeNames) {
  auto cache = MakeKvCache(SmallLayout(), {.max_tokens = 100, .dtype = KvDType::kBF16});
  cache->FillSynthetic(40, 1);
  EXPECT_EQ(cache->size(), 40);
  EXPECT_THROW(cache->FillSynthetic(61, 1), Error);
  EXPECT_EQ(ParseKvDType("bf16"), KvDType::kBF16);
  EXPECT_EQ(ParseKvDType("f16"), KvDType::kF16);
  EXPECT_EQ(ParseKvDType("f32"), KvDType::kF32);
  EXPECT_FALSE(ParseKvDType("fp8").has_value());
  EXPECT_EQ(KvDTypeName(KvDType::kF32), "f32");
}

}  // namespace
}  // namespace tq
