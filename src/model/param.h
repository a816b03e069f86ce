// A float vector parameter (norm weight, bias, RoPE table) kept on the host as loaded and in the
// backend's memory after Upload (host backends: a view of the host copy, nothing copied).
// Internal to model/.
#pragma once

#include <string_view>
#include <vector>

#include "core/device_buffer.h"
#include "kernels/backend.h"

namespace tq {

struct FloatParam {
  FloatParam() = default;
  FloatParam(std::vector<float> v) : host(std::move(v)) {}  // NOLINT: implicit from a vector

  std::vector<float> host;
  DeviceBuffer buf;  // the backend's copy (after Upload)

  bool empty() const { return host.empty(); }
  size_t size() const { return host.size(); }
  // The backend's copy; null before Upload (a kernel then fails loudly instead of reading the
  // host copy from a device).
  const float* data() const { return buf.as<const float>(); }
  void Upload(kernels::Backend& be, std::string_view what) {
    if (!host.empty()) buf = be.Upload(host.data(), host.size() * sizeof(float), what);
  }
};

}  // namespace tq
