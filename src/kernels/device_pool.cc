// DevicePool (device_pool.h): slabs for small requests, the raw allocator for large ones.
#include "kernels/device_pool.h"

#include <algorithm>
#include <utility>

namespace tq::kernels {
namespace {
size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

DevicePool::DevicePool(RawAlloc raw_alloc, RawFree raw_free, size_t direct_bytes)
    : raw_alloc_(std::move(raw_alloc)),
      raw_free_(std::move(raw_free)),
      direct_bytes_(std::max<size_t>(1, direct_bytes)) {}

DevicePool::~DevicePool() {
  for (auto& [p, b] : blocks_)
    if (b.slab < 0) raw_free_(p);
  for (Slab& s : slabs_)
    if (s.base) raw_free_(s.base);
}

int64_t DevicePool::slab_count() const {
  return std::count_if(slabs_.begin(), slabs_.end(), [](const Slab& s) { return s.base; });
}

bool DevicePool::Charge(size_t device_bytes) {
  return limit_ <= 0 || held_ + int64_t(device_bytes) <= limit_;
}

DevicePool::Result DevicePool::Allocate(size_t bytes) {
  Result r;
  if (bytes == 0) return r;
  if (bytes >= direct_bytes_) {
    r.device_bytes = bytes;
    if (!Charge(bytes)) {
      r.failure = Failure::kLimit;
      return r;
    }
    r.p = raw_alloc_(bytes);
    if (!r.p) {
      r.failure = Failure::kDevice;
      return r;
    }
    blocks_[r.p] = {bytes, 0, -1};
    held_ += int64_t(bytes);
    requested_ += int64_t(bytes);
    peak_ = std::max(peak_, held_);
    return r;
  }
  return FromSlab(bytes);
}

DevicePool::Result DevicePool::FromSlab(size_t bytes) {
  Result r;
  const size_t need = RoundUp(bytes, kAlign);
  // First fit over the slabs' free tops (the newest first: it has the most room).
  int pick = -1;
  for (int i = int(slabs_.size()) - 1; i >= 0 && pick < 0; --i)
    if (slabs_[size_t(i)].base && slabs_[size_t(i)].bytes - slabs_[size_t(i)].top >= need) pick = i;
  if (pick < 0) {
    // A new slab: 32 MiB first, then 64 MiB, but within what the limit leaves (at least this
    // request).
    size_t usable = next_slab_;
    if (limit_ > 0) {
      const int64_t left = limit_ - held_ - int64_t(kGuardBytes);
      if (left < int64_t(need)) {
        r.failure = Failure::kLimit;
        r.device_bytes = need + kGuardBytes;
        return r;
      }
      usable = std::min(usable, std::max(need, size_t(left) / kAlign * kAlign));
    }
    const size_t device = usable + kGuardBytes;
    r.device_bytes = device;
    void* base = raw_alloc_(device);
    if (!base && usable > need) {  // the device may still fit a smaller slab
      usable = RoundUp(std::max(need, kFirstSlabBytes / 4), kAlign);
      r.device_bytes = usable + kGuardBytes;
      base = raw_alloc_(usable + kGuardBytes);
    }
    if (!base) {
      r.failure = Failure::kDevice;
      return r;
    }
    slabs_.push_back({static_cast<char*>(base), usable, 0, 0});
    pick = int(slabs_.size()) - 1;
    held_ += int64_t(usable + kGuardBytes);
    peak_ = std::max(peak_, held_);
    next_slab_ = std::min(kMaxSlabBytes, next_slab_ * 2);
  }
  Slab& s = slabs_[size_t(pick)];
  r.p = s.base + s.top;
  s.top += need;
  ++s.live;
  blocks_[r.p] = {bytes, need, pick};
  requested_ += int64_t(bytes);
  r.device_bytes = 0;
  return r;
}

bool DevicePool::Free(void* p) {
  const auto it = blocks_.find(p);
  if (it == blocks_.end()) return false;
  const Block b = it->second;
  blocks_.erase(it);
  requested_ -= int64_t(b.bytes);
  if (b.slab < 0) {
    raw_free_(p);
    held_ -= int64_t(b.bytes);
    return true;
  }
  Slab& s = slabs_[size_t(b.slab)];
  if (static_cast<char*>(p) + b.rounded == s.base + s.top) s.top -= b.rounded;  // the top block
  if (--s.live == 0) ReleaseSlab(b.slab);
  return true;
}

// An empty slab: kept (reset) when it is the only empty one, else returned to the device.
void DevicePool::ReleaseSlab(int i) {
  Slab& s = slabs_[size_t(i)];
  s.top = 0;
  for (size_t j = 0; j < slabs_.size(); ++j) {
    if (int(j) == i || !slabs_[j].base || slabs_[j].live > 0) continue;
    raw_free_(s.base);  // another empty slab is already kept
    held_ -= int64_t(s.bytes + kGuardBytes);
    s = Slab{};
    return;
  }
}

}  // namespace tq::kernels
