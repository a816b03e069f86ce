// The CUDA backend's sources compiled for the host emulator (cuda_emu/emu.h): the same kernels
// and the same CudaBackend class, renamed so that a CUDA build links both. The conformance suite
// runs on this backend ("emu") in every build, and on the real one ("cuda") where a GPU is.
#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // the kernels' #pragma unroll
#define TQ_CUDA_EMU 1
#include "cuda_emu/emu.h"

// clang-format off
#define cuda cuda_emu
#define MakeCudaBackend MakeEmulatedCudaBackend
#define CudaDeviceCountImpl EmulatedCudaDeviceCountImpl
#include "../../src/kernels/cuda/elementwise.cu"
#include "../../src/kernels/cuda/rotate.cu"
#include "../../src/kernels/cuda/matvec.cu"
#include "../../src/kernels/cuda/matmul.cu"
#include "../../src/kernels/cuda/attention.cu"
#include "../../src/kernels/cuda/cuda_backend.cc"
// clang-format on
