// A move-only handle to memory owned by a compute backend (kernels/backend.h): host memory for
// the ref and cpu backends, device memory for cuda. It holds a pointer, a size in bytes, the
// memory space the pointer lives in and how to free it, so that kv/ and model/ can own device
// memory without including any device header. A non-owning view (no deleter) is how the cpu
// backend "uploads" mmapped weights: the pointer stays the file's, nothing is copied or freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tq {

enum class MemorySpace : uint8_t { kHost, kDevice };

class DeviceBuffer {
 public:
  using Deleter = void (*)(void* ptr, void* ctx);

  DeviceBuffer() = default;
  DeviceBuffer(void* ptr, size_t bytes, MemorySpace space, Deleter deleter, void* ctx)
      : ptr_(ptr), bytes_(bytes), space_(space), deleter_(deleter), ctx_(ctx) {}
  // Points at memory someone else owns (an mmapped weight, a caller's array).
  static DeviceBuffer View(const void* ptr, size_t bytes, MemorySpace space) {
    return DeviceBuffer(const_cast<void*>(ptr), bytes, space, nullptr, nullptr);
  }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      space_ = o.space_;
      deleter_ = std::exchange(o.deleter_, nullptr);
      ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
  }
  ~DeviceBuffer() { Reset(); }

  void Reset() {
    if (deleter_ && ptr_) deleter_(ptr_, ctx_);
    ptr_ = nullptr;
    bytes_ = 0;
    deleter_ = nullptr;
    ctx_ = nullptr;
  }

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  MemorySpace space() const { return space_; }
  bool owns() const { return deleter_ != nullptr; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemorySpace space_ = MemorySpace::kHost;
  Deleter deleter_ = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace tq
