#include "runtime/plan/device_memory.h"

#include "core/error.h"
#include "kernels/backend.h"

namespace tq {

bool BuiltWithCuda() { return kernels::BuiltWithCudaBackend(); }

CudaDeviceInfo QueryCudaDevice() {
  const kernels::GpuInfo g = kernels::QueryGpu(0);
  CudaDeviceInfo info;
  info.device = g.device;
  info.name = g.name;
  info.free_bytes = g.free_bytes;
  info.total_bytes = g.total_bytes;
  info.driver_version = g.driver_version;
  info.runtime_version = g.runtime_version;
  info.compute_major = g.compute_major;
  info.compute_minor = g.compute_minor;
  return info;
}

}  // namespace tq
