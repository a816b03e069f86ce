// Memory this process may use: RAM (MemAvailable) or, in a CUDA build, the GPU's free memory.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/backend.h"

namespace tq {

// True when this binary was built with CUDA (TQ_WITH_CUDA).
bool BuiltWithCuda();

// The GPU as the CUDA runtime reports it (kernels::GpuInfo).
using CudaDeviceInfo = kernels::GpuInfo;

// The current CUDA device's memory and versions. Throws tq::Error "[cuda] ..." when the build has
// no CUDA or no device is usable (the CUDA runtime's message).
CudaDeviceInfo QueryCudaDevice();

}  // namespace tq
