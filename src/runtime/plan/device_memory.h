// Memory this process may use: RAM (MemAvailable) or, in a CUDA build, the GPU's free memory.
#pragma once

#include <cstdint>
#include <string>

namespace tq {

// True when this binary was built with CUDA (TQ_WITH_CUDA).
bool BuiltWithCuda();

struct CudaDeviceInfo {
  int device = 0;
  std::string name;
  int64_t free_bytes = 0, total_bytes = 0;
  int driver_version = 0, runtime_version = 0;  // e.g. 12040 = 12.4
  int compute_major = 0, compute_minor = 0;
};

// The current CUDA device's memory and versions. Throws tq::Error "[cuda] ..." when the build has
// no CUDA or no device is usable (the CUDA runtime's message).
CudaDeviceInfo QueryCudaDevice();

}  // namespace tq
