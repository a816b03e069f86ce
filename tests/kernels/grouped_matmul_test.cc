// kernels/grouped_matmul.h: every item's output is bit for bit what its own backend call gives,
// whether the items run side by side on the pool (enough of them) or one after another; on the
// cpu and ref backends, for packed items (decode and int8-prefill row counts), single dense items
// (MatMul) and dense pairs (MatMulGroup).
#include "kernels/grouped_matmul.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "packed_test_util.h"

namespace tq::kernels {
namespace {

using test::RandomPacked;

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

void ExpectSameAsOneByOne(Backend& be) {
  const int64_t in = 128, out = 48;
  std::vector<test::Owned> packed;
  for (uint32_t e = 0; e < 6; ++e)
    packed.push_back(
        RandomPacked(quant::QuantMethod::kCodebook, quant::CodeFormat::kQ4, out, in, 32, 100 + e));
  const std::vector<float> dense_w = Random(2 * out * in, 7);
  const TensorView wa{dense_w.data(), DType::F32, {out, in}};
  const TensorView wb{dense_w.data() + out * in, DType::F32, {out, in}};
  const std::vector<float> bias = Random(out, 8);
  const int64_t rows[] = {1, 3, 16, 2, 9, 1};  // decode and prefill paths of the packed kernels
  std::vector<std::vector<float>> xs, got, want;
  for (int64_t r : rows) {
    xs.push_back(Random(r * in, uint32_t(r) + 1));
    got.emplace_back(size_t(r * out), -1.0f);
    want.emplace_back(size_t(r * out), -2.0f);
  }
  std::vector<float> ga(size_t(5 * out)), gb(size_t(5 * out)), wa_y(size_t(5 * out)),
      wb_y(size_t(5 * out)), one(size_t(4 * out)), one_want(size_t(4 * out));
  const std::vector<float> xd = Random(5 * in, 11), x1 = Random(4 * in, 12);
  const MatMulOutput pair[] = {{&wa, bias.data(), ga.data()}, {&wb, nullptr, gb.data()}};
  const MatMulOutput single[] = {{&wa, nullptr, one.data()}};
  std::vector<GroupedMatMulItem> items;
  for (size_t i = 0; i < packed.size(); ++i)
    items.push_back(
        {xs[i].data(), rows[i], &packed[i].view, i % 2 ? bias.data() : nullptr, got[i].data(), {}});
  items.push_back({xd.data(), 5, nullptr, nullptr, nullptr, pair});
  items.push_back({x1.data(), 4, nullptr, nullptr, nullptr, single});
  for (int threads : {1, 2, 4}) {
    ThreadPool::SetGlobalThreads(threads);
    GroupedMatMul(be, items);
    for (size_t i = 0; i < packed.size(); ++i) {
      be.PackedMatMul(xs[i].data(), rows[i], packed[i].view, i % 2 ? bias.data() : nullptr,
                      want[i].data());
      EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * 4))
          << be.name() << " item " << i << ", " << threads << " threads";
    }
    const MatMulOutput pair_want[] = {{&wa, bias.data(), wa_y.data()}, {&wb, nullptr, wb_y.data()}};
    be.MatMulGroup(xd.data(), 5, pair_want);
    EXPECT_EQ(0, std::memcmp(ga.data(), wa_y.data(), ga.size() * 4)) << be.name();
    EXPECT_EQ(0, std::memcmp(gb.data(), wb_y.data(), gb.size() * 4)) << be.name();
    be.MatMul(x1.data(), 4, wa, nullptr, one_want.data());
    EXPECT_EQ(0, std::memcmp(one.data(), one_want.data(), one.size() * 4)) << be.name();
  }
  ThreadPool::SetGlobalThreads(HardwareThreads());
}

TEST(GroupedMatMul, EachItemIsItsOwnCallBitForBit) {
  ExpectSameAsOneByOne(CpuBackend());
  ExpectSameAsOneByOne(RefBackend());
}

TEST(GroupedMatMul, AnItemWithoutWeightsIsAnError) {
  const float x[4] = {};
  const GroupedMatMulItem bad[] = {{x, 1, nullptr, nullptr, nullptr, {}}};
  EXPECT_THROW(GroupedMatMul(CpuBackend(), bad), Error);
}

}  // namespace
}  // namespace tq::kernels
