// The CUDA backend's sources compiled for the host emulator (cuda_emu_backend.cc, library
// tq_cuda_emu): the same kernels and CudaBackend class as the GPU build, run on the CPU with each
// CUDA thread a fiber. Slow, exact to the kernels' own arithmetic, and present in every build.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace tq::kernels {

std::unique_ptr<Backend> MakeEmulatedCudaBackend(int device);

// The emulated backend registered as device "emu" (kernels::RegisterBackend), made once; null
// under ASan, whose stack checks do not follow the emulator's ucontext fibers.
inline Backend* EmulatedCudaDevice() {
#if defined(__SANITIZE_ADDRESS__)
  return nullptr;
#else
  static std::unique_ptr<Backend> emu = [] {
    auto b = MakeEmulatedCudaBackend(0);
    RegisterBackend("emu", b.get());
    return b;
  }();
  return emu.get();
#endif
}

}  // namespace tq::kernels
