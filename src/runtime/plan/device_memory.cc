#include "runtime/plan/device_memory.h"

#include "core/error.h"
#include "kernels/backend.h"

namespace tq {

bool BuiltWithCuda() { return kernels::BuiltWithCudaBackend(); }

CudaDeviceInfo QueryCudaDevice() { return kernels::QueryGpu(0); }

}  // namespace tq
