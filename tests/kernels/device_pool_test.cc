// DevicePool (kernels/device_pool.h) over a host allocator that counts its calls: slabs for small
// requests, raw blocks for large ones, reuse, the limit and failures.
#include "kernels/device_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace tq::kernels {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// aligned_alloc / free with a record of what is live; fail_from: calls of at least this size fail.
struct Host {
  std::map<void*, size_t> live;
  int allocs = 0, frees = 0;
  size_t fail_from = ~size_t(0);
  DevicePool Pool(size_t direct = DevicePool::kDirectBytes) {
    return DevicePool(
        [this](size_t b) -> void* {
          ++allocs;
          if (b >= fail_from) return nullptr;
          void* p = std::aligned_alloc(256, (b + 255) / 256 * 256);  // as cudaMalloc's
          live[p] = b;
          return p;
        },
        [this](void* p) {
          ++frees;
          EXPECT_EQ(live.erase(p), 1u) << "freed a pointer the pool did not get";
          std::free(p);
        },
        direct);
  }
  size_t LiveBytes() const {
    size_t s = 0;
    for (const auto& [p, b] : live) s += b;
    return s;
  }
};

TEST(DevicePool, SmallRequestsShareSlabsWithoutOverlap) {
  Host h;
  {
    DevicePool pool = h.Pool();
    // 200 expert-sized blocks (0.75 MiB + a scale table's 12 KiB): the driver's 2 MiB pages
    // would hold ~2x their bytes.
    std::vector<std::pair<char*, size_t>> got;
    size_t asked = 0;
    for (int i = 0; i < 200; ++i) {
      const size_t b = i % 2 ? 786432 : 12288 + size_t(i);
      const DevicePool::Result r = pool.Allocate(b);
      ASSERT_EQ(r.failure, DevicePool::Failure::kNone);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(r.p) % DevicePool::kAlign, 0u);
      std::memset(r.p, i & 0xff, b);  // every byte is ours (ASan: inside the slab)
      got.push_back({static_cast<char*>(r.p), b});
      asked += b;
    }
    std::sort(got.begin(), got.end());
    for (size_t i = 1; i < got.size(); ++i)
      EXPECT_LE(got[i - 1].first + got[i - 1].second, got[i].first) << "blocks overlap";
    EXPECT_EQ(pool.requested(), int64_t(asked));
    EXPECT_EQ(pool.held(), int64_t(h.LiveBytes()));
    // 77 MiB asked: slabs of 32, 64 (and their guards) — within 30% of the bytes, not 2x.
    EXPECT_LT(double(pool.held()), 1.3 * double(asked));
    EXPECT_EQ(pool.slab_count(), 2);
    EXPECT_EQ(pool.peak_held(), pool.held());
  }
  EXPECT_TRUE(h.live.empty()) << "the destructor returns every slab";
  EXPECT_EQ(h.allocs, h.frees);
}

TEST(DevicePool, LargeRequestsAreRawBlocks) {
  Host h;
  DevicePool pool = h.Pool();
  const DevicePool::Result r = pool.Allocate(DevicePool::kDirectBytes + 100);
  ASSERT_EQ(r.failure, DevicePool::Failure::kNone);
  EXPECT_EQ(r.device_bytes, DevicePool::kDirectBytes + 100);
  EXPECT_EQ(pool.held(), int64_t(DevicePool::kDirectBytes + 100));
  EXPECT_EQ(pool.slab_count(), 0);
  EXPECT_TRUE(pool.Free(r.p));
  EXPECT_EQ(pool.held(), 0);
  EXPECT_TRUE(h.live.empty());
  EXPECT_FALSE(pool.Free(r.p)) << "a second free is refused";
  int x = 0;
  EXPECT_FALSE(pool.Free(&x));
}

TEST(DevicePool, TopBlockAndEmptySlabsAreReused) {
  Host h;
  DevicePool pool = h.Pool();
  const DevicePool::Result a = pool.Allocate(1000), b = pool.Allocate(5000);
  ASSERT_TRUE(a.p && b.p);
  EXPECT_TRUE(pool.Free(b.p));
  const DevicePool::Result c = pool.Allocate(4000);  // fits where b was: the top came down
  EXPECT_EQ(c.p, b.p);
  // Empty the slab: it is kept (one empty slab), so the next request asks nothing of the device.
  EXPECT_TRUE(pool.Free(a.p));
  EXPECT_TRUE(pool.Free(c.p));
  EXPECT_EQ(pool.slab_count(), 1);
  EXPECT_EQ(pool.requested(), 0);
  const int allocs = h.allocs;
  const DevicePool::Result d = pool.Allocate(3000);
  EXPECT_EQ(h.allocs, allocs);
  EXPECT_EQ(d.p, a.p) << "the kept slab starts again from its base";
  // Two slabs emptied: one is returned.
  std::vector<void*> fill;
  for (int i = 0; i < 40; ++i) fill.push_back(pool.Allocate(kMiB).p);  // spills into slab 2
  EXPECT_EQ(pool.slab_count(), 2);
  for (void* p : fill) EXPECT_TRUE(pool.Free(p));
  EXPECT_TRUE(pool.Free(d.p));
  EXPECT_EQ(pool.slab_count(), 1);
  EXPECT_EQ(pool.held(), int64_t(h.LiveBytes()));
}

TEST(DevicePool, TheLimitCapsWhatIsHeldAndAsksNothingPastIt) {
  Host h;
  DevicePool pool = h.Pool();
  pool.set_limit(int64_t(40 * kMiB));
  const DevicePool::Result big = pool.Allocate(20 * kMiB);
  ASSERT_EQ(big.failure, DevicePool::Failure::kNone);
  const int allocs = h.allocs;
  const DevicePool::Result over = pool.Allocate(30 * kMiB);
  EXPECT_EQ(over.failure, DevicePool::Failure::kLimit);
  EXPECT_EQ(over.p, nullptr);
  EXPECT_EQ(h.allocs, allocs) << "nothing asked of the device past the limit";
  // A small request opens a slab no larger than the limit leaves (20 MiB, not 32).
  const DevicePool::Result small = pool.Allocate(4096);
  ASSERT_EQ(small.failure, DevicePool::Failure::kNone);
  EXPECT_LE(pool.held(), int64_t(40 * kMiB));
  // Now full: the next raw block does not fit.
  EXPECT_EQ(pool.Allocate(DevicePool::kDirectBytes).failure, DevicePool::Failure::kLimit);
  EXPECT_TRUE(pool.Free(big.p));
  EXPECT_EQ(pool.Allocate(DevicePool::kDirectBytes).failure, DevicePool::Failure::kNone);
}

TEST(DevicePool, DeviceFailuresAreReportedAndSlabsShrinkToFit) {
  Host h;
  DevicePool pool = h.Pool();
  h.fail_from = 16 * kMiB;  // the device has no 32 MiB run left, but smaller ones
  const DevicePool::Result r = pool.Allocate(100000);
  ASSERT_EQ(r.failure, DevicePool::Failure::kNone) << "a smaller slab was tried";
  EXPECT_LT(pool.held(), int64_t(16 * kMiB));
  h.fail_from = 0;
  const DevicePool::Result big = pool.Allocate(DevicePool::kDirectBytes);
  EXPECT_EQ(big.failure, DevicePool::Failure::kDevice);
  EXPECT_EQ(big.device_bytes, DevicePool::kDirectBytes);
  EXPECT_EQ(pool.Allocate(0).p, nullptr);
  EXPECT_EQ(pool.Allocate(0).failure, DevicePool::Failure::kNone);
}

TEST(DevicePool, DirectOneMakesEveryBufferItsOwnAllocation) {
  Host h;
  DevicePool pool = h.Pool(1);
  const DevicePool::Result a = pool.Allocate(10), b = pool.Allocate(20);
  EXPECT_EQ(h.live.size(), 2u);
  EXPECT_EQ(pool.held(), 30);
  EXPECT_EQ(pool.slab_count(), 0);
  EXPECT_TRUE(pool.Free(a.p));
  EXPECT_TRUE(pool.Free(b.p));
  EXPECT_TRUE(h.live.empty());
}

}  // namespace
}  // namespace tq::kernels
