// The recurrent layers' state in a KvCache (Gated DeltaNet / Mamba-2 layers: kv_cache.h): zero
// for an empty sequence, a snapshot at the end of every multi-token commit (the last
// kMaxSnapshots), Truncate restoring one, refusing a position without one (naming those it has),
// ReusablePrefix saying what a truncation can keep, and the bytes counted by MemoryBytes and
// KvCacheBytes. For the plain and the TurboQuant cache.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_bytes.h"

namespace tq {
namespace {

KvLayout HybridLayout() {
  KvLayout l;
  l.num_layers = 1;  // one attention layer
  l.num_heads = 2;
  l.num_kv_heads = 1;
  l.head_dim = 32;
  l.recurrent_floats = {6, 4};  // two recurrent layers
  return l;
}

// Appends n tokens of zero keys / values to the attention layer and commits them, after
// setting the recurrent state to `value` (what a forward pass over them would do).
void Step(KvCache& c, int64_t n, float value) {
  const std::vector<float> kv(size_t(n * 32), 0.0f);
  c.Append(0, kv.data(), kv.data(), n);
  for (int64_t r = 0; r < c.num_recurrent(); ++r) {
    float* s = c.RecurrentState(r);
    for (int64_t i = 0; i < c.layout().recurrent_floats[size_t(r)]; ++i) s[i] = value;
  }
  c.Commit(n);
}

float StateAt(KvCache& c, int64_t r) { return c.RecurrentState(r)[0]; }

void CheckSnapshots(const KvCacheOptions& opts) {
  auto c = MakeKvCache(HybridLayout(), opts);
  ASSERT_EQ(c->num_recurrent(), 2);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c->RecurrentState(0)[i], 0.0f);
  Step(*c, 3, 1.0f);  // prompt chunk: snapshot at 3
  Step(*c, 1, 2.0f);  // decode: none
  Step(*c, 1, 3.0f);
  EXPECT_EQ(c->SnapshotPositions(), (std::vector<int64_t>{3}));
  EXPECT_EQ(c->ReusablePrefix(2), 0);
  EXPECT_EQ(c->ReusablePrefix(3), 3);
  EXPECT_EQ(c->ReusablePrefix(4), 3);
  EXPECT_EQ(c->ReusablePrefix(5), 5);  // everything: nothing to cut
  EXPECT_EQ(c->ReusablePrefix(9), 5);
  const int64_t state_bytes = (6 + 4) * 4;
  EXPECT_EQ(c->RecurrentBytes(), 2 * state_bytes);  // the state and one snapshot
  EXPECT_GE(c->MemoryBytes(), 2 * state_bytes);
  try {
    c->Truncate(4);
    ADD_FAILURE() << "truncated to a position without a snapshot";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("held only at positions 3"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(c->size(), 5);
  EXPECT_EQ(StateAt(*c, 1), 3.0f) << "a refused truncation leaves the state";
  c->Truncate(3);
  EXPECT_EQ(c->size(), 3);
  EXPECT_EQ(StateAt(*c, 0), 1.0f);
  EXPECT_EQ(StateAt(*c, 1), 1.0f);
  // Continue, then snapshots roll: only the last kMaxSnapshots chunk ends are kept.
  for (int k = 0; k < KvCache::kMaxSnapshots + 1; ++k) Step(*c, 2, 10.0f + float(k));
  const std::vector<int64_t> pos = c->SnapshotPositions();
  ASSERT_EQ(int(pos.size()), KvCache::kMaxSnapshots);
  EXPECT_EQ(pos.back(), 3 + 2 * (KvCache::kMaxSnapshots + 1));
  c->Truncate(pos[1]);
  EXPECT_EQ(StateAt(*c, 0), 10.0f + 2.0f);
  EXPECT_EQ(c->SnapshotPositions().back(), pos[1]) << "later snapshots are dropped";
  c->Truncate(0);
  EXPECT_TRUE(c->SnapshotPositions().empty());
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(c->RecurrentState(1)[i], 0.0f);
}

TEST(RecurrentState, PlainCacheSnapshotsAndTruncation) {
  CheckSnapshots({.max_tokens = 64, .dtype = KvDType::kF32});
}

TEST(RecurrentState, TurboQuantCacheSnapshotsAndTruncation) {
  CheckSnapshots({.max_tokens = 64, .k_bits = 4, .v_bits = 4});
}

TEST(RecurrentState, KvCacheBytesCountTheStateOnce) {
  KvLayout l = HybridLayout();
  const KvCacheOptions o{.max_tokens = 64, .dtype = KvDType::kF32};
  const int64_t with = KvCacheBytes(l, o, 10);
  l.recurrent_floats.clear();
  EXPECT_EQ(with - KvCacheBytes(l, o, 10), (6 + 4) * 4);
}

TEST(RecurrentState, BadStateSizeIsRefused) {
  KvLayout l = HybridLayout();
  l.recurrent_floats = {6, 0};
  EXPECT_THROW(MakeKvCache(l, {.max_tokens = 8}), Error);
}

}  // namespace
}  // namespace tq
