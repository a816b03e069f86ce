// DevicePool: a sub-allocator over a device's raw allocator (cudaMalloc / cudaFree on the CUDA
// backend), with the backend's accounting and its --gpu-memory-limit.
//
// Why: the driver hands out device memory in 2 MiB pages, so a model of many mid-size tensors
// held far more than it asked for: Qwen3-30B-A3B 4-bit (18,432 expert matrices of 0.75 MiB)
// allocated 15.0 GiB and the card showed 19.6 GiB in use, DeepSeek-V2-Lite (1.375 MiB experts)
// 8.1 vs 11.7 GiB; through the pool 15.8 and 9.0 GiB (H100, session 21). Requests below
// kDirectBytes are carved from slabs (32 MiB, then 64 MiB: larger slabs left up to ~0.1 GiB of
// a dense 8B model's last slab unused) at 256-byte alignment; larger ones go to the raw
// allocator as they are (their page rounding is at most a few percent).
//
// Slab space is reused only at the top (a freed block at a slab's top lowers it) and when a slab
// empties (one empty slab is kept for the next request, any other is returned); the weights,
// caches and grow-only scratch this pool serves are long-lived, so holes stay few. Every slab
// keeps kGuardBytes unused at its end: a kernel's vector over-read past its last buffer stays in
// memory the pool holds, as it did in the driver's page.
//
// Not thread-safe: the owner serializes calls (CudaBackend holds its memory mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace tq::kernels {

class DevicePool {
 public:
  static constexpr size_t kAlign = 256;                    // cudaMalloc's alignment
  static constexpr size_t kDirectBytes = size_t(8) << 20;  // requests of 8 MiB or more: raw
  static constexpr size_t kFirstSlabBytes = size_t(32) << 20;
  static constexpr size_t kMaxSlabBytes = size_t(64) << 20;
  static constexpr size_t kGuardBytes = size_t(64) << 10;

  // raw_alloc(bytes) -> pointer or nullptr (out of memory); raw_free(pointer).
  using RawAlloc = std::function<void*(size_t)>;
  using RawFree = std::function<void(void*)>;
  // direct_bytes: requests of at least this size go to the raw allocator (1: all of them — the
  // host emulator's setting, so that ASan sees every buffer's bounds).
  DevicePool(RawAlloc raw_alloc, RawFree raw_free, size_t direct_bytes = kDirectBytes);
  ~DevicePool();  // returns every slab and raw block still held
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  enum class Failure { kNone, kLimit, kDevice };
  struct Result {
    void* p = nullptr;
    Failure failure = Failure::kNone;
    size_t device_bytes = 0;  // what was asked of the device (a slab or the raw request)
  };
  // A block of `bytes` (> 0) aligned to kAlign, or a failure: kLimit when the device bytes it
  // needs would take held() past limit() (nothing is asked of the device then), kDevice when the
  // raw allocator returned nullptr.
  Result Allocate(size_t bytes);
  // Frees a block of Allocate (the caller has made sure no queued work still reads it).
  // Returns false for a pointer the pool did not hand out.
  bool Free(void* p);

  // Bytes held from the device (slabs + raw blocks): what the limit caps and the card shows.
  int64_t held() const { return held_; }
  int64_t peak_held() const { return peak_; }
  // Bytes of the live blocks as requested (held() minus slab slack and free slab space).
  int64_t requested() const { return requested_; }
  int64_t slab_count() const;
  // 0: no limit.
  void set_limit(int64_t bytes) { limit_ = bytes; }
  int64_t limit() const { return limit_; }

 private:
  struct Slab {
    char* base = nullptr;
    size_t bytes = 0;  // usable (kGuardBytes after it are held, never handed out)
    size_t top = 0;    // bump offset
    int64_t live = 0;  // blocks handed out and not freed
  };
  struct Block {
    size_t bytes = 0;    // as requested
    size_t rounded = 0;  // kAlign multiple taken from the slab (0 for a raw block)
    int slab = -1;       // index into slabs_, -1 for a raw block
  };
  bool Charge(size_t device_bytes);
  Result FromSlab(size_t bytes);
  void ReleaseSlab(int i);

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  std::vector<Slab> slabs_;  // a returned slab leaves base == nullptr (indices stay stable)
  std::unordered_map<void*, Block> blocks_;
  size_t direct_bytes_;
  size_t next_slab_ = kFirstSlabBytes;
  int64_t held_ = 0, peak_ = 0, requested_ = 0, limit_ = 0;
};

}  // namespace tq::kernels
