// TurboQuantKvCache: attention on the codes equals attention on the decompressed cache (ref
// oracle), 8-bit is close to the float cache, sink/window/boundary/sliding layers, truncation
// and re-append, sizes, and option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "kv/turboquant_kv_cache.h"
#include "kv_test_util.h"

namespace tq {
namespace {

using kvtest::Layout;
using kvtest::Nmse;
using kvtest::Random;

// Runs chunks of tokens through every layer of `cache` (and of `plain`, a float cache, if given);
// returns the attention outputs of the last layer of the last chunk.
struct Runner {
  explicit Runner(KvCache& c) : cache(c) {}
  KvCache& cache;
  std::mt19937 rng{5};
  std::vector<float> Step(int64_t n, KvCache* plain = nullptr,
                          std::vector<float>* plain_out = nullptr) {
    const KvLayout& l = cache.layout();
    const int64_t kvw = l.num_kv_heads * l.head_dim, qw = l.num_heads * l.head_dim;
    std::vector<float> out(static_cast<size_t>(n * qw));
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      const auto k = Random(static_cast<size_t>(n * kvw), rng),
                 v = Random(static_cast<size_t>(n * kvw), rng);
      auto q = Random(static_cast<size_t>(n * qw), rng, 2.0f);
      cache.Append(layer, k.data(), v.data(), n);
      cache.Attend(layer, q.data(), n, out.data());
      if (plain) {
        plain->Append(layer, k.data(), v.data(), n);
        plain_out->resize(out.size());
        plain->Attend(layer, q.data(), n, plain_out->data());
      }
      last_q = q;
    }
    cache.Commit(n);
    if (plain) plain->Commit(n);
    return out;
  }
  std::vector<float> last_q;
};

// Attention over the decompressed layer with the ref float kernel.
std::vector<float> DecompressThenAttend(const TurboQuantKvCache& c, int64_t layer,
                                        const std::vector<float>& q, int64_t n) {
  const KvLayout& l = c.layout();
  const int64_t total = c.size(), d = l.head_dim, H = l.num_kv_heads;
  std::vector<float> k(static_cast<size_t>(total * H * d)), v(k.size());
  c.DecodeLayer(layer, total, k.data(), v.data());
  // KvView wants [kv_heads, positions, d].
  std::vector<float> kt(k.size()), vt(v.size());
  for (int64_t t = 0; t < total; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < d; ++j) {
        kt[static_cast<size_t>((h * total + t) * d + j)] =
            k[static_cast<size_t>((t * H + h) * d + j)];
        vt[static_cast<size_t>((h * total + t) * d + j)] =
            v[static_cast<size_t>((t * H + h) * d + j)];
      }
  kernels::KvView view{kt.data(), vt.data(), DType::F32, total * d};
  kernels::AttentionParams p{l.num_heads, l.num_kv_heads, d, l.scale, 0};
  std::vector<float> out(q.size());
  kernels::RefBackend().Attention(q.data(), n, total - n, view, p, out.data());
  return out;
}

struct Config {
  double k_bits, v_bits;
  int64_t sink, window;
  KvScale scale;
  int64_t center = 0;
  int64_t outliers = 0;  // the outlier-channel split (K and V where the width splits exactly)
};

class CacheVsDecompressed : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override { kernels::SetKvInt8Scoring(false); }  // exact scores (see kernels tests)
  void TearDown() override { kernels::SetKvInt8Scoring(true); }
};

TEST_P(CacheVsDecompressed, RefAndCpuMatchTheDecompressedCache) {
  const Config cfg = GetParam();
  KvCacheOptions o;
  o.max_tokens = 256;
  o.k_bits = cfg.k_bits;
  o.v_bits = cfg.v_bits;
  o.sink = cfg.sink;
  o.window = cfg.window;
  o.scale = cfg.scale;
  o.center = cfg.center;
  o.outliers = cfg.outliers;
  o.roundtrip_stats = true;
  auto cache = MakeKvCache(Layout(), o);
  auto* tq = dynamic_cast<TurboQuantKvCache*>(cache.get());
  ASSERT_NE(tq, nullptr);
  Runner run{*cache};
  for (int64_t n : {37, 1, 1, 50, 1}) {
    // Not committed yet: compare on the layer the runner appended last, before Commit.
    const KvLayout& l = cache->layout();
    const int64_t last = l.num_layers - 1;
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      std::mt19937 rng(unsigned(n * 31 + layer));
      const int64_t kvw = l.num_kv_heads * l.head_dim, qw = l.num_heads * l.head_dim;
      const auto k = Random(static_cast<size_t>(n * kvw), rng),
                 v = Random(static_cast<size_t>(n * kvw), rng);
      const auto q = Random(static_cast<size_t>(n * qw), rng, 2.0f);
      cache->Append(layer, k.data(), v.data(), n);
      std::vector<float> ref(q.size()), cpu(q.size());
      cache->UseBackend(kernels::RefBackend());
      cache->Attend(layer, q.data(), n, ref.data());
      cache->UseBackend(kernels::CpuBackend());
      cache->Attend(layer, q.data(), n, cpu.data());
      EXPECT_LT(Nmse(cpu, ref), 1e-9) << "layer " << layer << " n " << n;
      if (layer == last) {
        // DecompressThenAttend reads size() positions: commit first, then attend the last n.
        cache->Commit(n);
        const auto dec = DecompressThenAttend(*tq, layer, q, n);
        EXPECT_LT(Nmse(ref, dec), 1e-9) << "n " << n;
      }
    }
  }
  EXPECT_GT(tq->stats().k_count, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, CacheVsDecompressed,
    ::testing::Values(Config{4, 4, 0, 0, KvScale::kNorm}, Config{8, 3, 0, 0, KvScale::kMse},
                      Config{3.5, 2.5, 4, 0, KvScale::kMse}, Config{4, 3, 3, 40, KvScale::kNorm},
                      Config{2, 8, 0, 7, KvScale::kMse}, Config{4, 3, 2, 0, KvScale::kMse, 16},
                      // Outlier split: both sides, K unsplit (4 bits) with window, fractional.
                      Config{3, 2.5, 0, 0, KvScale::kMse, 16, 32},
                      Config{4, 3, 3, 40, KvScale::kNorm, 0, 32},
                      Config{3.5, 2, 4, 0, KvScale::kMse, 8, 32}));

TEST(TurboQuantKvCache, EightBitsIsCloseToFloat) {
  KvCacheOptions o;
  o.max_tokens = 300;
  o.k_bits = o.v_bits = 8;
  o.roundtrip_stats = true;
  auto cache = MakeKvCache(Layout(), o);
  KvCacheOptions f;
  f.max_tokens = 300;
  f.dtype = KvDType::kF32;
  auto plain = MakeKvCache(Layout(), f);
  Runner run{*cache};
  std::vector<float> want;
  run.Step(200, plain.get(), &want);
  const auto got = run.Step(1, plain.get(), &want);
  EXPECT_LT(Nmse(got, want), 1e-3);
  const auto tq = dynamic_cast<TurboQuantKvCache*>(cache.get());
  EXPECT_GT(tq->stats().k_mean(), 0.9999);
}

TEST(TurboQuantKvCache, LowBitsDegradeGracefully) {
  // Attention NMSE grows as bits shrink, and 4 bits stays small.
  double prev = 0;
  for (double bits : {8.0, 4.0, 3.0, 2.0}) {
    KvCacheOptions o;
    o.max_tokens = 200;
    o.k_bits = o.v_bits = bits;
    o.center = 0;  // zero-mean random values: a 32-sample mean would only add its own noise
    auto cache = MakeKvCache(Layout(1), o);
    KvCacheOptions f;
    f.max_tokens = 200;
    f.dtype = KvDType::kF32;
    auto plain = MakeKvCache(Layout(1), f);
    Runner run{*cache};
    std::vector<float> want;
    run.Step(150, plain.get(), &want);
    const auto got = run.Step(1, plain.get(), &want);
    const double e = Nmse(got, want);
    EXPECT_GT(e, prev) << bits;
    if (bits == 4) {
      EXPECT_LT(e, 0.05);
    }
    prev = e;
  }
}

TEST(TurboQuantKvCache, TruncateThenReappendMatchesFresh) {
  KvCacheOptions o;
  o.max_tokens = 128;
  o.k_bits = 4;
  o.v_bits = 3;
  o.sink = 2;
  o.window = 8;
  for (int64_t keep : {1, 2, 20, 30}) {
    auto a = MakeKvCache(Layout(2), o), b = MakeKvCache(Layout(2), o);
    Runner ra{*a}, rb{*b};
    ra.Step(30);
    rb.Step(30);
    rb.Step(20);  // b runs ahead, then is cut back to `keep`
    a->Truncate(std::min<int64_t>(keep, 30));
    b->Truncate(std::min<int64_t>(keep, 30));
    EXPECT_EQ(b->size(), a->size());
    ra.rng.seed(9);
    rb.rng.seed(9);
    const auto x = ra.Step(5), y = rb.Step(5);
    if (keep <= 2) {
      EXPECT_EQ(x, y) << keep;  // only sink positions: the same fp16 data
    } else {
      // b coded positions that a still holds in fp16: close, not equal.
      EXPECT_LT(Nmse(x, y), 0.05) << keep;
    }
    EXPECT_EQ(a->size(), std::min<int64_t>(keep, 30) + 5);
  }
}

TEST(TurboQuantKvCache, BoundaryAndSlidingLayersArePlain) {
  KvLayout l = Layout(6);
  l.window = {0, 0, 16, 0, 0, 0};
  KvCacheOptions o;
  o.max_tokens = 64;
  o.k_bits = 4;
  o.v_bits = 4;
  o.boundary = 1;
  auto cache = MakeKvCache(l, o);
  auto* tq = dynamic_cast<TurboQuantKvCache*>(cache.get());
  ASSERT_NE(tq, nullptr);
  const bool want[] = {false, true, false, true, true, false};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(tq->IsCompressed(i), want[i]) << i;
  // 3 fp16 layers: 2 * 2 heads * 64 * 2 bytes; 3 coded: 2 heads * (32 + 2 + 32 + 2).
  EXPECT_EQ(cache->BytesPerToken(), 3 * 512 + 3 * 136);
  Runner run{*cache};
  run.Step(40);
  run.Step(1);
  EXPECT_EQ(cache->size(), 41);
}

TEST(TurboQuantKvCache, BytesPerToken) {
  KvCacheOptions o;
  o.k_bits = 8;
  o.v_bits = 3;
  // Per layer and kv head: K 64 + 2, V 24 + 2 bytes; 3 layers, 2 kv heads.
  EXPECT_EQ(MakeKvCache(Layout(), o)->BytesPerToken(), 3 * 2 * (66 + 26));
  KvCacheOptions plain;
  EXPECT_EQ(MakeKvCache(Layout(), plain)->BytesPerToken(), 3 * 2 * 2 * 64 * 2);
}

TEST(TurboQuantKvCache, FillSyntheticAndOverflow) {
  KvCacheOptions o;
  o.max_tokens = 40;
  o.k_bits = 3;
  o.v_bits = 3;
  o.window = 4;
  auto cache = MakeKvCache(Layout(), o);
  cache->FillSynthetic(39, 1);
  EXPECT_EQ(cache->size(), 39);
  std::vector<float> k(2 * 2 * 64), v(k.size());
  EXPECT_THROW(cache->Append(0, k.data(), v.data(), 2), Error);
  Runner run{*cache};
  run.Step(1);
  EXPECT_EQ(cache->size(), 40);
}

TEST(TurboQuantKvCache, BadOptionsNameTheField) {
  auto expect_error = [](KvCacheOptions o, const std::string& field) {
    try {
      MakeKvCache(Layout(), o);
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  KvCacheOptions o;
  o.k_bits = 5;
  o.v_bits = 4;
  expect_error(o, "k_bits");
  o.k_bits = 4;
  o.v_bits = 0;
  expect_error(o, "v_bits");
  o.v_bits = 4;
  o.sink = -1;
  expect_error(o, "sink");
  o.sink = 0;
  o.window = -3;
  expect_error(o, "window");
}

}  // namespace
}  // namespace tq
