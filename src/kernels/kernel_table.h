// The legacy kernel table (being replaced by backend.h's Backend). Kernel backends are tables of functions (ggml style). `ref` is the scalar oracle (always
// built, single-threaded, obvious); `cpu` is the fast SIMD backend with run-time ISA dispatch.
// ops.h calls the active table, chosen once at startup ($TQ_KERNELS=ref|cpu, default cpu).
// Adding a backend means adding a table here and a folder kernels/<backend>/.
#pragma once

#include <string_view>

#include "kernels/ops.h"

namespace tq::kernels {

struct KernelTable {
  std::string_view name;
  void (*matmul)(const float* x, int64_t n, const TensorView& w, const float* bias, float* y);
  void (*matmul_group)(const float* x, int64_t n, std::span<const MatMulOutput> outs);
  void (*rms_norm)(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                   float* out);
  void (*rope)(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
               const float* inv_freq, float attn_factor);
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  void (*attention)(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                    const AttentionParams& p, float* out);
};

const KernelTable& RefKernels();
const KernelTable& CpuKernels();
// The table ops.h dispatches to.
const KernelTable& ActiveKernels();
// Replaces the active table (tests, benchmarks; not while kernels run).
void SetActiveKernels(const KernelTable& table);

}  // namespace tq::kernels
