// Sliding-window layers keep only their window (kv_cache.h): a cache whose window layers hold
// window + max_append slots attends exactly like a cache that stores every position and masks,
// through chunks smaller and larger than the window, truncation and several wraps; its memory
// stops growing at the slots, and kv_cache_bytes projects the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_bytes.h"
#include "kv/turboquant_kv_cache.h"

namespace tq {
namespace {

// Three layers: full attention, window 5, window 9.
KvLayout MixedLayout() {
  KvLayout l;
  l.num_layers = 3;
  l.num_heads = 4;
  l.num_kv_heads = 2;
  l.head_dim = 16;
  l.scale = 1.0f / std::sqrt(16.0f);
  l.window = {0, 5, 9};
  return l;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Feeds the same keys, values and queries to both caches, chunk by chunk; every Attend output of
// `ring` must equal that of `full` (which stores every position) within 1e-5.
class Twin {
 public:
  Twin(KvCache& ring, KvCache& full, uint64_t seed) : ring_(ring), full_(full), rng_(seed) {}

  void Step(int64_t n) {
    const KvLayout& l = ring_.layout();
    const int64_t width = l.num_kv_heads * l.head_dim, qwidth = l.num_heads * l.head_dim;
    for (int64_t layer = 0; layer < l.num_layers; ++layer) {
      const auto k = Random(size_t(n * width), rng_), v = Random(size_t(n * width), rng_);
      const auto q = Random(size_t(n * qwidth), rng_);
      std::vector<float> a(q.size()), b(q.size());
      ring_.Append(layer, k.data(), v.data(), n);
      full_.Append(layer, k.data(), v.data(), n);
      ring_.Attend(layer, q.data(), n, a.data());
      full_.Attend(layer, q.data(), n, b.data());
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], 1e-5) << "layer " << layer << " at " << ring_.size() << " i " << i;
    }
    ring_.Commit(n);
    full_.Commit(n);
  }

 private:
  KvCache& ring_;
  KvCache& full_;
  std::mt19937 rng_;
};

TEST(SlidingWindowCache, RingMatchesFullCacheForChunksSmallerAndLargerThanTheWindow) {
  const KvLayout layout = MixedLayout();
  for (int64_t max_append : {1, 2, 4, 7, 12, 20}) {
    SCOPED_TRACE("max_append " + std::to_string(max_append));
    const KvCacheOptions ring_opts{
        .max_tokens = 400, .dtype = KvDType::kF32, .max_append = max_append};
    auto ring = MakeKvCache(layout, ring_opts);
    auto full = MakeKvCache(layout, {.max_tokens = 400, .dtype = KvDType::kF32, .max_append = 400});
    Twin twin(*ring, *full, uint64_t(max_append));
    // Prefill in chunks of every size up to max_append (several wraps of both windows), then
    // decode one token at a time.
    int64_t n = max_append;
    for (int64_t total = 0; total < 150; total += n, n = n == 1 ? max_append : n - 1) {
      twin.Step(n);
      if (HasFatalFailure()) return;
    }
    for (int i = 0; i < 40; ++i) twin.Step(1);
    if (HasFatalFailure()) return;
    // The window layers hold only their slots: memory stops at window + max_append positions.
    const int64_t position = 2 * layout.num_kv_heads * layout.head_dim * 4;
    const int64_t held = (ring->size() + KvLayerSlots(5, ring_opts) + KvLayerSlots(9, ring_opts));
    EXPECT_EQ(ring->MemoryBytes(), held * position);
    EXPECT_EQ(ring->MemoryBytes(), KvCacheBytes(layout, ring_opts, ring->size()));
    EXPECT_EQ(full->MemoryBytes(), 3 * ring->size() * position);
  }
}

TEST(SlidingWindowCache, BytesStopGrowingAfterTheWindow) {
  KvLayout l = MixedLayout();
  l.window = {6, 6, 6};
  const KvCacheOptions o{.max_append = 10};
  const int64_t position = 2 * l.num_kv_heads * l.head_dim * 2;  // fp16 key + value
  EXPECT_EQ(KvCacheBytes(l, o, 4), 3 * 4 * position);
  EXPECT_EQ(KvCacheBytes(l, o, 16), 3 * 16 * position);
  for (int64_t t : {17, 100, 100000}) EXPECT_EQ(KvCacheBytes(l, o, t), 3 * 16 * position) << t;
  // A full-attention layer keeps growing; the TurboQuant cache leaves window layers plain and
  // sized the same way.
  l.window = {0, 6, 6};
  EXPECT_EQ(KvCacheBytes(l, o, 1000), (1000 + 2 * 16) * position);
  KvCacheOptions c = o;
  c.k_bits = c.v_bits = 4;
  const int64_t coded_full = KvCacheBytes(l, c, 1000) - 2 * 16 * position;
  l.window = {0, 0, 0};
  KvLayout one = l;
  one.num_layers = 1;
  one.window = {0};
  EXPECT_EQ(coded_full, KvCacheBytes(one, c, 1000));
}

TEST(SlidingWindowCache, TruncateKeepsOnlyWhatTheWindowStillHolds) {
  const KvLayout layout = MixedLayout();
  const KvCacheOptions ring_opts{.max_tokens = 200, .dtype = KvDType::kF32, .max_append = 3};
  auto ring = MakeKvCache(layout, ring_opts);
  auto full = MakeKvCache(layout, {.max_tokens = 200, .dtype = KvDType::kF32, .max_append = 200});
  Twin twin(*ring, *full, 11);
  for (int i = 0; i < 20; ++i) twin.Step(3);  // 60 tokens: both windows have slid
  ASSERT_FALSE(HasFatalFailure());
  const int64_t floor = ring->MinTruncate();
  EXPECT_GT(floor, 0);
  EXPECT_LE(floor, ring->size());
  EXPECT_EQ(full->MinTruncate(), 0);
  // Below the floor: refused, nothing changed.
  EXPECT_THROW(ring->Truncate(floor - 1), Error);
  EXPECT_EQ(ring->size(), 60);
  try {
    ring->Truncate(10);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window"), std::string::npos) << e.what();
  }
  // At the floor: continues exactly like the full cache truncated there.
  ring->Truncate(floor);
  full->Truncate(floor);
  for (int i = 0; i < 10; ++i) twin.Step(i % 3 + 1);
  ASSERT_FALSE(HasFatalFailure());
  // To 0: starts over (a new sequence).
  ring->Truncate(0);
  full->Truncate(0);
  EXPECT_EQ(ring->MinTruncate(), 0);
  for (int i = 0; i < 30; ++i) twin.Step(2);
}

TEST(SlidingWindowCache, AppendLargerThanMaxAppendIsRefused) {
  const KvLayout layout = MixedLayout();
  auto ring = MakeKvCache(layout, {.max_tokens = 100, .max_append = 4});
  const int64_t width = layout.num_kv_heads * layout.head_dim;
  std::vector<float> kv(size_t(20 * width), 0.5f);
  // The first append fits in the empty slots (window 5 + 4 = 9 >= 8).
  for (int64_t l = 0; l < 3; ++l) ring->Append(l, kv.data(), kv.data(), 8);
  ring->Commit(8);
  ring->Append(0, kv.data(), kv.data(), 10);  // the full-attention layer has room
  try {
    ring->Append(1, kv.data(), kv.data(), 10);  // needs 4 + 10 > 9 slots
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_append"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeKvCache(layout, {.max_append = 0}), Error);
  KvLayout bad = layout;
  bad.window = {0, -1, 5};
  EXPECT_THROW(MakeKvCache(bad, {}), Error);
}

TEST(SlidingWindowCache, TurboQuantCacheKeepsOnlyTheWindowOfItsPlainLayers) {
  const KvLayout layout = MixedLayout();
  KvCacheOptions o{.max_tokens = 300, .max_append = 5};
  o.k_bits = 4;
  o.v_bits = 3;
  o.window = 8;
  KvCacheOptions f = o;
  f.max_append = 300;
  auto ring = MakeKvCache(layout, o);
  auto full = MakeKvCache(layout, f);
  Twin twin(*ring, *full, 5);
  for (int i = 0; i < 30; ++i) twin.Step(i % 5 + 1);
  for (int i = 0; i < 20; ++i) twin.Step(1);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GT(ring->MinTruncate(), 0);
  EXPECT_THROW(ring->Truncate(1), Error);
  EXPECT_EQ(ring->size(), 110);
  ring->Truncate(ring->MinTruncate());
  full->Truncate(ring->size());
  for (int i = 0; i < 5; ++i) twin.Step(2);
  // FillSynthetic appends in chunks no larger than max_append.
  auto filled = MakeKvCache(layout, o);
  filled->FillSynthetic(200, 3);
  EXPECT_EQ(filled->size(), 200);
}

}  // namespace
}  // namespace tq
