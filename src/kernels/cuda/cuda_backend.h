// The CUDA backend's factory (kernels/cuda/, built with -DTQ_CUDA=ON). A plain header: no CUDA
// types, so kernels/backend.cc can include it; nothing outside kernels/ includes it.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace tq::kernels::cuda {

// GPUs the CUDA runtime sees (0 when there is no driver or no device).
int DeviceCount();
// Properties, memory and versions of GPU `device` (cuda_device_query.cc).
GpuInfo QueryDevice(int device);
// The backend of GPU `device` (its own stream, cuBLAS handle and scratch). Throws tq::Error
// naming the device when it cannot be initialized.
std::unique_ptr<Backend> MakeBackend(int device);

}  // namespace tq::kernels::cuda
