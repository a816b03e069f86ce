// The paper's outlier-channel split (KvCacheOptions::outliers): exact split widths, the codec's
// layout and bytes, that the chosen channels are the high-energy ones (they get the wider codes),
// that an unsplit side is bit-identical to a cache without the option, and option errors.
// Attention on the codes vs the decompressed cache: CacheVsDecompressed (turboquant_cache_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/kv_ops.h"
#include "kv/turboquant_codec.h"
#include "kv/turboquant_kv_cache.h"
#include "kv_test_util.h"

namespace tq {
namespace {

using kvtest::Layout;
using kvtest::Nmse;
using kvtest::Random;

TEST(KvOutlierSplit, ExactWidthsOnly) {
  auto widths = [](int64_t dim, double bits, int64_t n) {
    const auto w = KvOutlierSplit(dim, bits, n);
    return w ? std::to_string(w->hi) + "/" + std::to_string(w->lo) : std::string("none");
  };
  EXPECT_EQ(widths(64, 3, 32), "4/2");
  EXPECT_EQ(widths(64, 2.5, 32), "3/2");
  EXPECT_EQ(widths(64, 3.5, 32), "4/3");
  EXPECT_EQ(widths(64, 2, 32), "3/1");
  EXPECT_EQ(widths(64, 4, 32), "none");  // would need 5 bits
  EXPECT_EQ(widths(64, 8, 32), "none");
  EXPECT_EQ(widths(128, 2.5, 32), "4/2");  // 32 * 4 + 96 * 2 = 320 = 2.5 * 128
  EXPECT_EQ(widths(128, 3, 32), "none");
  EXPECT_EQ(widths(64, 3, 16), "none");  // not a multiple of 32
  EXPECT_EQ(widths(64, 3, 64), "none");
  EXPECT_FALSE(KvOutlierCountProblem(64, 16).empty());
  EXPECT_FALSE(KvOutlierCountProblem(64, 0).empty());
  EXPECT_TRUE(KvOutlierCountProblem(64, 32).empty());
  EXPECT_EQ(KvOutlierGroup(64, 32), 32);
  EXPECT_EQ(KvOutlierGroup(128, 32), 32);
  EXPECT_EQ(KvOutlierGroup(256, 128), 128);
}

TEST(KvOutlierSplit, CodecLayoutAndRoundtrip) {
  const KvVectorCodec c(64, 32, KvOutlierWidths{4, 2}, KvScale::kMse, KvCodebook::kSphere);
  EXPECT_EQ(c.bits(), 3.0);
  EXPECT_EQ(c.outliers(), 32);
  EXPECT_EQ(c.code_bytes(), 16 + 8);  // 32 codes at 4 bits, 32 at 2
  EXPECT_EQ(c.groups(), 2);           // one scale per subset
  ASSERT_EQ(c.format().num_segments, 2);
  EXPECT_EQ(c.format().segments[1].begin, 32);
  // A vector whose first half is 10x the second: the wide half keeps its 4-bit accuracy.
  std::mt19937 rng(3);
  auto x = Random(64, rng);
  for (int i = 0; i < 32; ++i) x[size_t(i)] *= 10;
  std::vector<uint8_t> codes(size_t(c.code_bytes()));
  std::vector<uint16_t> scales(2);
  std::vector<float> back(64);
  c.Encode(x.data(), codes.data(), scales.data());
  c.Decode(codes.data(), scales.data(), back.data());
  EXPECT_LT(Nmse(back, x), 0.02);
}

KvCacheOptions Opts(double k, double v, int64_t outliers) {
  KvCacheOptions o;
  o.max_tokens = 256;
  o.k_bits = k;
  o.v_bits = v;
  o.outliers = outliers;
  return o;
}

// Per kv head, 32 random channels carry 10x the energy (different sets per head and for K / V).
struct OutlierData {
  std::vector<float> k, v;
  OutlierData(const KvLayout& l, int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    const int64_t H = l.num_kv_heads, D = l.head_dim;
    k = Random(size_t(n * H * D), rng);
    v = Random(size_t(n * H * D), rng);
    for (std::vector<float>* x : {&k, &v}) {
      for (int64_t h = 0; h < H; ++h) {
        std::vector<int> ch(static_cast<size_t>(D));
        for (int j = 0; j < D; ++j) ch[size_t(j)] = j;
        std::shuffle(ch.begin(), ch.end(), rng);
        for (int64_t t = 0; t < n; ++t)
          for (int j = 0; j < 32; ++j) (*x)[size_t((t * H + h) * D + ch[size_t(j)])] *= 10;
      }
    }
  }
};

// Decoded NMSE of keys and values of every layer after appending `data`.
std::pair<double, double> DecodedNmse(const KvCacheOptions& o, const OutlierData& data, int64_t n) {
  const KvLayout l = Layout();
  TurboQuantKvCache c(l, o);
  for (int64_t layer = 0; layer < l.num_layers; ++layer)
    c.Append(layer, data.k.data(), data.v.data(), n);
  c.Commit(n);
  std::vector<float> k(data.k.size()), v(data.v.size());
  double ek = 0, ev = 0;
  for (int64_t layer = 0; layer < l.num_layers; ++layer) {
    c.DecodeLayer(layer, n, k.data(), v.data());
    ek += Nmse(k, data.k) / double(l.num_layers);
    ev += Nmse(v, data.v) / double(l.num_layers);
  }
  return {ek, ev};
}

// With real outlier channels the split finds them: at the same 3 bits its error is well below
// the unsplit codec's (the 10x channels get 4-bit codes). Wrong channels would make it worse.
TEST(OutlierSplitCache, FindsTheOutlierChannels) {
  const KvLayout l = Layout();
  const OutlierData data(l, 100, 9);
  KvCacheOptions plain = Opts(3, 3, 0), split = Opts(3, 3, 32);
  plain.center = split.center = 0;
  const auto [pk, pv] = DecodedNmse(plain, data, 100);
  const auto [sk, sv] = DecodedNmse(split, data, 100);
  EXPECT_LT(sk, 0.6 * pk) << pk << " " << sk;
  EXPECT_LT(sv, 0.6 * pv) << pv << " " << sv;
}

// A side without an exact split (K4) is untouched: the keys decode bit-identically to a cache
// without the option, while the values (V3: 32 at 4 + 32 at 2) differ.
TEST(OutlierSplitCache, UnsplitSideIsBitIdentical) {
  const KvLayout l = Layout();
  const OutlierData data(l, 40, 4);
  TurboQuantKvCache a(l, Opts(4, 3, 0)), b(l, Opts(4, 3, 32));
  EXPECT_EQ(b.key_codec().outliers(), 0);
  EXPECT_EQ(b.value_codec().outliers(), 32);
  for (TurboQuantKvCache* c : {&a, &b}) {
    for (int64_t layer = 0; layer < l.num_layers; ++layer)
      c->Append(layer, data.k.data(), data.v.data(), 40);
    c->Commit(40);
  }
  std::vector<float> ka(data.k.size()), va(ka.size()), kb(ka.size()), vb(ka.size());
  a.DecodeLayer(1, 40, ka.data(), va.data());
  b.DecodeLayer(1, 40, kb.data(), vb.data());
  EXPECT_EQ(std::memcmp(ka.data(), kb.data(), ka.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0);
}

TEST(OutlierSplitCache, BytesPerTokenAreExact) {
  // Per layer and kv head: K3 and V3 split 32/32: 16 + 8 code bytes + 2 scales each.
  EXPECT_EQ(MakeKvCache(Layout(), Opts(3, 3, 32))->BytesPerToken(), 3 * 2 * 2 * (24 + 4));
  // K4 stays unsplit (32 + 2), V2.5 split 32 at 3 + 32 at 2 (12 + 8 + 4).
  EXPECT_EQ(MakeKvCache(Layout(), Opts(4, 2.5, 32))->BytesPerToken(), 3 * 2 * (34 + 24));
}

TEST(OutlierSplitCache, BadOptionsNameTheField) {
  for (const KvCacheOptions& o :
       {Opts(3, 3, 16), Opts(3, 3, 64), Opts(3, 3, -32), Opts(4, 4, 32), Opts(8, 4, 32)}) {
    try {
      MakeKvCache(Layout(), o);
      ADD_FAILURE() << "no error for outliers " << o.outliers << " K" << o.k_bits;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outliers"), std::string::npos) << e.what();
    }
  }
}

// The attention view checks that a channel order is a permutation.
TEST(OutlierSplitCache, BadChannelOrderIsAnError) {
  const KvLayout l = Layout();
  TurboQuantKvCache c(l, Opts(3, 3, 32));
  const OutlierData data(l, 8, 2);
  c.Append(0, data.k.data(), data.v.data(), 8);
  kernels::CompressedKvView view = c.View(0);
  std::vector<int32_t> order(view.k_order, view.k_order + 2 * 64);
  order[5] = order[6];
  view.k_order = order.data();
  kernels::AttentionParams p{l.num_heads, l.num_kv_heads, l.head_dim, l.scale, 0};
  std::vector<float> q(size_t(8 * l.num_heads * l.head_dim)), out(q.size());
  EXPECT_THROW(kernels::CompressedAttention(q.data(), 8, 0, view, p, out.data()), Error);
}

}  // namespace
}  // namespace tq
