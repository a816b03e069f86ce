// TurboQuantKvCache with the QJL key sketch (opts.qjl): attention on the cache equals attention
// with the estimator computed by hand from the decoded keys and the stored sketches (ref and cpu
// kernels, prefill and decode, sink / window / boundary / sliding layers), storage sizes, option
// errors, truncation + re-append, determinism, and the scores are unbiased through the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/backend.h"
#include "kv/kv_cache_bytes.h"
#include "kv/turboquant_kv_cache.h"
#include "kv_test_util.h"

namespace tq {
namespace {

using kvtest::Layout;
using kvtest::Nmse;
using kvtest::Random;

// The estimator by hand: for the last n positions' queries, softmax over
//   q·k̂ + (coded key ? ‖r‖ √(π/2)/m ⟨S R_k q, sign(S r)⟩ : 0)
// with k̂, v from DecodeLayer (un-rotated), the sketch from View(layer).
std::vector<float> ByHand(const TurboQuantKvCache& c, int64_t layer, const std::vector<float>& q,
                          int64_t n) {
  const KvLayout& l = c.layout();
  const int64_t total = c.size(), d = l.head_dim, H = l.num_kv_heads, group = l.num_heads / H;
  std::vector<float> k(size_t(total * H * d)), v(k.size()), out(q.size());
  c.DecodeLayer(layer, total, k.data(), v.data());
  const kernels::CompressedKvView view = c.View(layer);
  const KvQjlSketch* sketch = c.qjl_sketch(layer);
  std::vector<float> qr(static_cast<size_t>(d)), sq(static_cast<size_t>(d));
  std::vector<double> s(static_cast<size_t>(total));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = total - n + i;
    for (int64_t h = 0; h < l.num_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qh = q.data() + (i * l.num_heads + h) * d;
      std::copy_n(qh, d, qr.begin());
      view.k_rotation->Forward(qr.data());
      sketch->Project(qr.data(), sq.data());
      double mx = -INFINITY;
      for (int64_t t = 0; t <= pos; ++t) {
        double dot = 0;
        for (int64_t j = 0; j < d; ++j) dot += double(qh[j]) * k[size_t((t * H + kvh) * d + j)];
        const kernels::KvSpan& mid = view.spans[1];
        if (t >= mid.begin && t < mid.end) {
          const int64_t slot = kvh * mid.head_stride + t - mid.begin;
          dot += sketch->EstimateResidualDot(sq.data(), mid.k_qjl + slot * sketch->sign_bytes(),
                                             mid.k_qjl_norm[slot]);
        }
        s[size_t(t)] = dot * l.scale;
        mx = std::max(mx, s[size_t(t)]);
      }
      double sum = 0;
      for (int64_t t = 0; t <= pos; ++t) sum += (s[size_t(t)] = std::exp(s[size_t(t)] - mx));
      float* o = out.data() + (i * l.num_heads + h) * d;
      for (int64_t j = 0; j < d; ++j) {
        double a = 0;
        for (int64_t t = 0; t <= pos; ++t) a += s[size_t(t)] * v[size_t((t * H + kvh) * d + j)];
        o[j] = float(a / sum);
      }
    }
  }
  return out;
}

struct Config {
  double k_bits, v_bits;
  int64_t sink, window;
  int64_t d = 64;
};

class QjlCache : public ::testing::TestWithParam<Config> {
 protected:
  void TearDown() override { kernels::SetKvInt8Scoring(true); }
};

TEST_P(QjlCache, RefAndCpuComputeTheEstimator) {
  const Config cfg = GetParam();
  KvCacheOptions o;
  o.max_tokens = 256;
  o.k_bits = cfg.k_bits;
  o.v_bits = cfg.v_bits;
  o.sink = cfg.sink;
  o.window = cfg.window;
  o.qjl = true;
  const KvLayout l = Layout(3, cfg.d);
  auto cache = MakeKvCache(l, o);
  auto* tq = dynamic_cast<TurboQuantKvCache*>(cache.get());
  ASSERT_NE(tq, nullptr);
  ASSERT_NE(tq->qjl_sketch(0), nullptr);
  EXPECT_EQ(tq->key_codec().bits(), cfg.k_bits - 1);
  for (int64_t n : {37, 1, 1, 70, 1}) {  // prefill chunks and decode steps
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      std::mt19937 rng(unsigned(n * 31 + layer));
      const int64_t kvw = l.num_kv_heads * l.head_dim, qw = l.num_heads * l.head_dim;
      const auto k = Random(size_t(n * kvw), rng), v = Random(size_t(n * kvw), rng);
      const auto q = Random(size_t(n * qw), rng, 2.0f);
      cache->Append(layer, k.data(), v.data(), n);
      std::vector<float> ref(q.size()), cpu(q.size()), cpu8(q.size());
      cache->UseBackend(kernels::RefBackend());
      cache->Attend(layer, q.data(), n, ref.data());
      cache->UseBackend(kernels::CpuBackend());
      kernels::SetKvInt8Scoring(false);
      cache->Attend(layer, q.data(), n, cpu.data());
      kernels::SetKvInt8Scoring(true);
      cache->Attend(layer, q.data(), n, cpu8.data());
      EXPECT_LT(Nmse(cpu, ref), 1e-9) << "layer " << layer << " n " << n;
      EXPECT_LT(Nmse(cpu8, ref), 2e-3) << "int8 scores, layer " << layer << " n " << n;
      if (layer == l.num_layers - 1) {
        cache->Commit(n);
        EXPECT_LT(Nmse(ref, ByHand(*tq, layer, q, n)), 1e-9) << "n " << n;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, QjlCache,
                         ::testing::Values(Config{4, 3, 0, 0}, Config{3, 3, 0, 0},
                                           Config{2, 4, 0, 0}, Config{2.5, 2.5, 0, 0},
                                           Config{3.5, 4, 0, 0}, Config{4, 4, 3, 40},
                                           Config{3, 8, 2, 7}, Config{4, 3, 0, 0, 128}));

TEST(QjlCacheSizes, BytesPerTokenCountsTheSketch) {
  KvCacheOptions o;
  o.k_bits = 4;
  o.v_bits = 3;
  o.qjl = true;
  // Per layer and kv head: K 3-bit codes 24 + scale 2 + 64 sign bits 8 + ‖r‖ 2; V 24 + 2.
  EXPECT_EQ(MakeKvCache(Layout(), o)->BytesPerToken(), 3 * 2 * (24 + 2 + 8 + 2 + 24 + 2));
  o.k_bits = 2;  // 1-bit codes: 8 bytes
  EXPECT_EQ(MakeKvCache(Layout(), o)->BytesPerToken(), 3 * 2 * (8 + 2 + 8 + 2 + 24 + 2));
  o.k_bits = 2.5;  // 32 channels at 2 bits + 32 at 1 bit: 12 bytes
  EXPECT_EQ(MakeKvCache(Layout(), o)->BytesPerToken(), 3 * 2 * (12 + 2 + 8 + 2 + 24 + 2));
  // The projection agrees, with sink, window and a boundary layer.
  o.k_bits = 4;
  o.sink = 4;
  o.window = 16;
  o.boundary = 1;
  KvLayout l = Layout(4);
  auto cache = MakeKvCache(l, o);
  cache->FillSynthetic(100, 3);
  // 2 plain layers: 100 positions x 2 heads x 64 x 2 (K, V) x 2 bytes; 2 compressed layers per
  // head: 4 sink positions + the tail buffer (window + 32 = 48) in fp16 (256 bytes), and the
  // 100 - 4 - 16 = 80 positions outside sink and window coded (62 bytes: the projection counts
  // the tail buffer whole, kv_cache_bytes.cc).
  const int64_t want = 2 * 100 * 2 * 64 * 2 * 2 + 2 * 2 * (52 * 256 + 80 * 62);
  EXPECT_EQ(KvCacheBytes(l, o, 100), want);
}

TEST(QjlCacheSizes, BoundaryAndSlidingLayersStayPlain) {
  // 5 layers: boundary 1 (layers 0 and 4 fp16), layer 2 a sliding window (fp16, its window);
  // layers 1 and 3 coded with sketches. Prefill and decode run and match the ref kernel.
  KvLayout l = Layout(5);
  l.window = {0, 0, 16, 0, 0};
  KvCacheOptions o;
  o.max_tokens = 128;
  o.k_bits = 3.5;
  o.v_bits = 3;
  o.boundary = 1;
  o.qjl = true;
  auto cache = MakeKvCache(l, o);
  auto* tq = dynamic_cast<TurboQuantKvCache*>(cache.get());
  ASSERT_NE(tq, nullptr);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(tq->IsCompressed(i), i == 1 || i == 3) << i;
    EXPECT_EQ(tq->qjl_sketch(i) != nullptr, i == 1 || i == 3) << i;
  }
  // 3 fp16 layers: 2 heads x 64 x 2 x 2 bytes; 2 coded: 2 heads x (K 2.5-bit 20 + 2 + 8 + 2,
  // V 24 + 2).
  EXPECT_EQ(cache->BytesPerToken(), 3 * 512 + 2 * 2 * (20 + 2 + 8 + 2 + 24 + 2));
  std::mt19937 rng(3);
  for (int64_t n : {40, 1, 30, 1}) {
    for (int64_t layer = 0; layer < 5; ++layer) {
      const auto k = Random(size_t(n * 128), rng), v = Random(size_t(n * 128), rng);
      const auto q = Random(size_t(n * 512), rng, 2.0f);
      cache->Append(layer, k.data(), v.data(), n);
      std::vector<float> ref(q.size()), cpu(q.size());
      cache->UseBackend(kernels::RefBackend());
      cache->Attend(layer, q.data(), n, ref.data());
      cache->UseBackend(kernels::CpuBackend());
      cache->Attend(layer, q.data(), n, cpu.data());
      EXPECT_LT(Nmse(cpu, ref), 2e-3) << "layer " << layer << " n " << n;
    }
    cache->Commit(n);
  }
  EXPECT_EQ(cache->size(), 72);
}

TEST(QjlCacheSizes, BadKeyBitsNameQjl) {
  KvCacheOptions o;
  o.k_bits = 8;
  o.v_bits = 4;
  o.qjl = true;
  try {
    MakeKvCache(Layout(), o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qjl"), std::string::npos) << e.what();
  }
}

// Runs the same tokens through a cache; returns the last layer's outputs of the last chunk.
std::vector<float> RunChunks(KvCache& c, const std::vector<int64_t>& chunks, unsigned seed) {
  const KvLayout& l = c.layout();
  std::mt19937 rng(seed);
  std::vector<float> out;
  for (int64_t n : chunks) {
    out.assign(size_t(n * l.num_heads * l.head_dim), 0.0f);
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      const auto k = Random(size_t(n * l.num_kv_heads * l.head_dim), rng);
      const auto v = Random(k.size(), rng);
      const auto q = Random(out.size(), rng, 2.0f);
      c.Append(layer, k.data(), v.data(), n);
      c.Attend(layer, q.data(), n, out.data());
    }
    c.Commit(n);
  }
  return out;
}

TEST(QjlCacheReuse, DeterministicAndTruncateThenReappendMatchesFresh) {
  KvCacheOptions o;
  o.max_tokens = 128;
  o.k_bits = 4;
  o.v_bits = 3;
  o.center = 0;  // the value mean comes from the first chunk: a reused prefix would differ
  o.qjl = true;
  auto a = MakeKvCache(Layout(2), o), b = MakeKvCache(Layout(2), o);
  const auto first = RunChunks(*a, {30, 1}, 4);
  EXPECT_EQ(first, RunChunks(*b, {30, 1}, 4));  // same inputs, same outputs
  // c runs ahead 10 positions past 30 and is cut back (inside the coded part); d never ran
  // ahead: the next 5 positions attend to the same codes and sketches.
  auto c = MakeKvCache(Layout(2), o), d = MakeKvCache(Layout(2), o);
  RunChunks(*c, {30, 10}, 4);
  RunChunks(*d, {30}, 4);
  c->Truncate(30);
  EXPECT_EQ(RunChunks(*c, {5}, 8), RunChunks(*d, {5}, 8));
  // Another seed gives other rotations and sketches, so other outputs.
  o.seed = 99;
  auto e = MakeKvCache(Layout(2), o);
  EXPECT_NE(RunChunks(*e, {30, 1}, 4), first);
}

TEST(QjlCacheQuality, ScoresUnbiasedThroughTheCache) {
  // 16 layers (16 matrices S), one kv head, 250 keys each; every key k_t is scored by its own
  // query q_t = k_t + noise (a large, positive q·k: where the MSE codes' shrink shows). The mean
  // error of q·k is within 4 standard errors of 0 with the sketch (K3+qjl: the 2-bit codes plus
  // signs) and many standard errors below 0 with the same 2-bit codes alone (K2).
  KvLayout l = Layout(16);
  l.num_heads = l.num_kv_heads = 1;
  const int64_t n = 250, d = 64;
  double mean[2], sem[2];
  for (int qjl = 0; qjl < 2; ++qjl) {
    KvCacheOptions o;
    o.max_tokens = n;
    o.k_bits = qjl ? 3 : 2;
    o.v_bits = 4;
    o.qjl = qjl == 1;
    auto cache = MakeKvCache(l, o);
    auto* tq = dynamic_cast<TurboQuantKvCache*>(cache.get());
    std::mt19937 rng(11);  // the same keys and queries for both
    std::vector<std::vector<float>> keys, queries;
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      keys.push_back(Random(size_t(n * d), rng));
      std::vector<float> q = Random(size_t(n * d), rng, 0.5f);
      for (size_t i = 0; i < q.size(); ++i) q[i] += keys.back()[i];
      queries.push_back(std::move(q));
      const std::vector<float> v(size_t(n * d), 0.0f);
      cache->Append(layer, keys.back().data(), v.data(), n);
    }
    cache->Commit(n);
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    std::vector<float> kd(size_t(n * d)), vd(kd.size()), qr(static_cast<size_t>(d)),
        sq(static_cast<size_t>(d));
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      tq->DecodeLayer(layer, n, kd.data(), vd.data());
      const kernels::CompressedKvView view = tq->View(layer);
      for (int64_t t = 0; t < n; ++t) {
        const float* q = queries[size_t(layer)].data() + t * d;
        const float* k = keys[size_t(layer)].data() + t * d;
        double exact = 0, est = 0;
        for (int64_t j = 0; j < d; ++j) {
          exact += double(q[j]) * k[j];
          est += double(q[j]) * kd[size_t(t * d + j)];
        }
        if (qjl) {
          std::copy_n(q, d, qr.begin());
          view.k_rotation->Forward(qr.data());
          const KvQjlSketch* s = tq->qjl_sketch(layer);
          s->Project(qr.data(), sq.data());
          est += s->EstimateResidualDot(sq.data(), view.spans[1].k_qjl + t * s->sign_bytes(),
                                        view.spans[1].k_qjl_norm[t]);
        }
        sum += est - exact, sum2 += (est - exact) * (est - exact), ++count;
      }
    }
    mean[qjl] = sum / double(count);
    sem[qjl] = std::sqrt((sum2 / double(count) - mean[qjl] * mean[qjl]) / double(count));
  }
  std::printf("q.k error through the cache: K2 mean %+.4f (sem %.4f), K3+qjl %+.4f (sem %.4f)\n",
              mean[0], sem[0], mean[1], sem[1]);
  EXPECT_LT(std::fabs(mean[1]), 4 * sem[1]);
  EXPECT_LT(mean[0], -10 * sem[0]);
}

}  // namespace
}  // namespace tq
