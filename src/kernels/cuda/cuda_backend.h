// The CUDA backend's factory, in a plain header (no CUDA header: kernels/backend.cc includes it
// under #if TQ_WITH_CUDA). The backend itself is kernels/cuda/cuda_backend.cc.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace tq::kernels {

// A backend on CUDA device `device` (its own stream; products of up to 8 tokens are the
// fp32-accumulating kernels of kernels/cuda/, larger ones bf16 tensor-core GEMMs through cuBLAS
// with fp32 accumulation, TURBOQUANT_CUDA_GEMM in cuda_backend.cc). Throws tq::Error naming the
// device when it cannot be had (no driver, no such device).
std::unique_ptr<Backend> MakeCudaBackend(int device);

// CUDA devices visible to this process; 0 when there is no driver or no device (never throws).
int CudaDeviceCountImpl();

// Properties, memory and versions of GPU `device` (cuda_device_query.cc).
GpuInfo QueryCudaGpuImpl(int device);

}  // namespace tq::kernels
