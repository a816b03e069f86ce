#include "runtime/plan/device_memory.h"

#include "core/error.h"

#if defined(TQ_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace tq {

#if defined(TQ_WITH_CUDA)

bool BuiltWithCuda() { return true; }

CudaDeviceInfo QueryCudaDevice() {
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) Fail("cuda", "{}: {}", what, cudaGetErrorString(e));
  };
  CudaDeviceInfo info;
  check(cudaDriverGetVersion(&info.driver_version), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&info.runtime_version), "cudaRuntimeGetVersion");
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  TQ_CHECK(count > 0, "cuda", "no CUDA device found");
  check(cudaGetDevice(&info.device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, info.device), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  info.free_bytes = int64_t(free_b);
  info.total_bytes = int64_t(total_b);
  return info;
}

#else

bool BuiltWithCuda() { return false; }

CudaDeviceInfo QueryCudaDevice() {
  Fail("cuda", "this turboquant was built without CUDA (configure with -DTQ_CUDA=ON)");
}

#endif

}  // namespace tq
