// cuBLAS for the many-token products (launch.h "blas.cc"): bf16 × bf16 with fp32 accumulation
// (CUBLAS_COMPUTE_32F: the tensor cores, fp32 sums) on the backend's stream, with a fixed
// workspace so that no call allocates (and a captured CUDA graph could replay it).
//
// libcublas is opened when the CUDA backend is made (dlopen), not linked: libcublasLt is a 540 MB
// library whose loading costs a process ~200 MB of resident memory and a tenth of a second, which a
// CUDA build's CPU runs (`--device cpu`, plan, convert) should not pay. Without it the backend
// falls back to its fp32 kernels (cuda_backend.cc).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>
#include <type_traits>

#include "kernels/cuda/launch.h"

namespace tq::kernels::cuda {
namespace {

// The entry points used, resolved from the shared library.
struct BlasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  // (C++ also sees an inline overload of cublasGemmEx taking cudaDataType_t's older enum)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
};

// Null with *error set when libcublas cannot be opened or lacks a symbol.
const BlasApi* LoadApi(const char** error) {
  static std::once_flag once;
  static BlasApi api;
  static std::string why;
  static bool ok = false;
  std::call_once(once, [] {
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      // Beside the CUDA runtime this process loaded (a toolkit outside the loader's paths).
      Dl_info info{};
      if (dladdr(reinterpret_cast<const void*>(&cudaRuntimeGetVersion), &info) && info.dli_fname) {
        std::string dir = info.dli_fname;
        dir = dir.substr(0, dir.find_last_of('/') + 1);
        lib = dlopen((dir + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
      }
    }
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = soname + " could not be opened (" + dlerror() + ")";
      return;
    }
    auto sym = [&](const char* name, auto& fn) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && why.empty()) why = soname + " has no " + name;
    };
    sym("cublasCreate_v2", api.create);
    sym("cublasDestroy_v2", api.destroy);
    sym("cublasSetStream_v2", api.set_stream);
    sym("cublasSetWorkspace_v2", api.set_workspace);
    sym("cublasGemmEx", api.gemm_ex);
    sym("cublasGetStatusString", api.status_string);
    ok = why.empty();
  });
  if (!ok) *error = why.c_str();
  return ok ? &api : nullptr;
}

// cuBLAS's recommendation for Hopper (sm_90): 32 MiB.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

}  // namespace

struct Blas {
  const BlasApi* api = nullptr;
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

Blas* CreateBlas(cudaStream_t s, const char** error) {
  const BlasApi* api = LoadApi(error);
  if (!api) return nullptr;
  auto* b = new Blas;
  b->api = api;
  cublasStatus_t st = api->create(&b->handle);
  if (st == CUBLAS_STATUS_SUCCESS) st = api->set_stream(b->handle, s);
  if (st == CUBLAS_STATUS_SUCCESS && cudaMalloc(&b->workspace, kWorkspaceBytes) != cudaSuccess) {
    cudaGetLastError();
    *error = "out of device memory for the cuBLAS workspace (32 MiB)";
    DestroyBlas(b);
    return nullptr;
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = api->set_workspace(b->handle, b->workspace, kWorkspaceBytes);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *error = api->status_string(st);
    DestroyBlas(b);
    return nullptr;
  }
  return b;
}

void DestroyBlas(Blas* b) {
  if (!b) return;
  if (b->handle) b->api->destroy(b->handle);
  if (b->workspace) cudaFree(b->workspace);
  delete b;
}

const char* GemmBf16(Blas* b, const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows,
                     int64_t in, float beta, float* y, int64_t ldy) {
  if (n > INT_MAX || rows > INT_MAX || in > INT_MAX || ldy > INT_MAX)
    return "a dimension above 2^31 (cuBLAS takes 32-bit sizes)";
  const float alpha = 1.0f;
  // Column-major view: Y (rows × n, ld ldy) = opT(W) · X, where W row-major [rows, in] is
  // [in × rows] with ld in, and X row-major [n, in] is [in × n] with ld in.
  const cublasStatus_t st =
      b->api->gemm_ex(b->handle, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n), int(in), &alpha, w,
                      CUDA_R_16BF, int(in), x, CUDA_R_16BF, int(in), &beta, y, CUDA_R_32F, int(ldy),
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? nullptr : b->api->status_string(st);
}

}  // namespace tq::kernels::cuda
