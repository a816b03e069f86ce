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
#include "../../src/kernels/cuda/family_ops.cu"
#include "../../src/kernels/cuda/rotate.cu"
#include "../../src/kernels/cuda/matvec.cu"
#include "../../src/kernels/cuda/matvec_tiles.cu"
#include "../../src/kernels/cuda/matvec_mma.cu"
#include "../../src/kernels/cuda/matmul.cu"
#include "../../src/kernels/cuda/gemm_bf16.cu"
#include "../../src/kernels/cuda/attention.cu"
#include "../../src/kernels/cuda/attention_piped.cu"
#include "../../src/kernels/cuda/attention_prefill.cu"
#include "../../src/kernels/cuda/attention_compressed.cu"
#include "../../src/kernels/cuda/attention_compressed_piped.cu"
#include "../../src/kernels/cuda/kv_encode.cu"
#include "../../src/kernels/cuda/cuda_backend.cc"
// clang-format on

// cuBLAS (kernels/cuda/blas.cc) on the host: the same bf16 operands, products summed in fp32.
namespace tq::kernels::cuda {  // cuda_emu, by the macro above
struct Blas {};
Blas* CreateBlas(cudaStream_t, const char**) { return new Blas; }
void DestroyBlas(Blas* b) { delete b; }
const char* GemmBf16(Blas*, const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows,
                     int64_t in, float beta, float* y, int64_t ldy) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t k = 0; k < in; ++k) acc += Bf16(w[r * in + k]) * Bf16(x[t * in + k]);
      float& out = y[t * ldy + r];
      out = beta == 0.0f ? acc : beta * out + acc;
    }
  return nullptr;
}
}  // namespace tq::kernels::cuda
