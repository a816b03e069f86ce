// The CUDA runtime's view of one GPU (properties, memory, versions): doctor and plan.
#include <cuda_runtime.h>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"

namespace tq::kernels {

GpuInfo QueryCudaGpuImpl(int device) {
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) Fail("cuda", "{}: {}", what, cudaGetErrorString(e));
  };
  GpuInfo info;
  info.device = device;
  check(cudaDriverGetVersion(&info.driver_version), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&info.runtime_version), "cudaRuntimeGetVersion");
  const int count = CudaDeviceCountImpl();
  TQ_CHECK(count > 0, "cuda", "no CUDA device found");
  TQ_CHECK(device >= 0 && device < count, "cuda", "device {} out of range: {} GPU(s)", device,
           count);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  check(cudaSetDevice(device), "cudaSetDevice");
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  check(cudaSetDevice(current), "cudaSetDevice");
  info.free_bytes = int64_t(free_b);
  info.total_bytes = int64_t(total_b);
  return info;
}

}  // namespace tq::kernels
