// cuBLAS for the many-token products (launch.h "blas.cc"): bf16 × bf16 with fp32 accumulation
// (CUBLAS_COMPUTE_32F: the tensor cores, fp32 sums) on the backend's stream, with a fixed
// workspace so that no call allocates (and a captured CUDA graph could replay it).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>

#include "kernels/cuda/launch.h"

namespace tq::kernels::cuda {

struct Blas {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

namespace {
// cuBLAS's recommendation for Hopper (sm_90): 32 MiB.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
}  // namespace

Blas* CreateBlas(cudaStream_t s, const char** error) {
  auto* b = new Blas;
  cublasStatus_t st = cublasCreate(&b->handle);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(b->handle, s);
  if (st == CUBLAS_STATUS_SUCCESS && cudaMalloc(&b->workspace, kWorkspaceBytes) != cudaSuccess) {
    cudaGetLastError();
    *error = "out of device memory for the cuBLAS workspace (32 MiB)";
    DestroyBlas(b);
    return nullptr;
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetWorkspace(b->handle, b->workspace, kWorkspaceBytes);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *error = cublasGetStatusString(st);
    DestroyBlas(b);
    return nullptr;
  }
  return b;
}

void DestroyBlas(Blas* b) {
  if (!b) return;
  if (b->handle) cublasDestroy(b->handle);
  if (b->workspace) cudaFree(b->workspace);
  delete b;
}

const char* GemmBf16(Blas* b, const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows,
                     int64_t in, float beta, float* y, int64_t ldy) {
  if (n > INT_MAX || rows > INT_MAX || in > INT_MAX || ldy > INT_MAX)
    return "a dimension above 2^31 (cuBLAS takes 32-bit sizes)";
  const float alpha = 1.0f;
  // Column-major view: Y (rows × n, ld ldy) = Wᵀ' (W row-major [rows, in] is [in × rows] with
  // ld in, transposed) · X (row-major [n, in] is [in × n] with ld in).
  const cublasStatus_t st =
      cublasGemmEx(b->handle, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n), int(in), &alpha, w,
                   CUDA_R_16BF, int(in), x, CUDA_R_16BF, int(in), &beta, y, CUDA_R_32F, int(ldy),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? nullptr : cublasGetStatusString(st);
}

}  // namespace tq::kernels::cuda
