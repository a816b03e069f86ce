// The cpu backend: host memory, SIMD kernels with run-time ISA dispatch, the thread pool.
#include <fmt/format.h>

#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_decode.h"
#include "kernels/cpu/packed_matmul_amx.h"
#include "kernels/cpu/packed_prefill.h"
#include "kernels/host_backend.h"

namespace tq::kernels {
namespace {

// Batched decode (the server's 8-32 sequences per step): up to here, rows go through the int8
// decode kernels cpu::kFastDecodeMaxTokens at a time instead of the tiled path, which
// dequantizes every weight to fp32 for only a few rows. Measured (bench_decode_batch
// BM_PackedRows, [8192, 2048] q4 g64, 1 thread): 8 rows 17.5 ms tiled vs 4.3 ms as 7 + 1,
// 16 rows 24.5 vs 13.2 ms, 32 rows 50 vs 43 ms; 64 rows 68 vs 86 ms (tiled wins from ~40 rows).
constexpr int64_t kDecodeSplitMaxRows = 32;

class CpuBackendImpl final : public HostBackend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string Describe() const override {
    return fmt::format("cpu ({}, {} threads)", cpu::IsaName(cpu::ActiveIsa()),
                       ThreadPool::Global().size());
  }
  bool Supports(Op) const override { return true; }

  void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
               float* out) override {
    cpu::RmsNorm(x, rows, dim, weight, eps, out);
  }
  void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias,
              float* y) override {
    kernels::MatMul(x, n, w, bias, y);
  }
  void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) override {
    kernels::MatMulGroup(x, n, outs);
  }
  void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                    float* y) override {
    const int64_t chunk = cpu::kFastDecodeMaxTokens;
    // With the amx level the whole batch is one AMX call (cpu/packed_matmul_amx.h).
    // With the int8 GEMM (cpu/packed_prefill.h) the whole batch is one call too.
    if (n > chunk && n <= kDecodeSplitMaxRows && cpu::FastDecodeSupports(w) &&
        !cpu::AmxPackedSupports(w) && !cpu::PrefillInt8Supports(w)) {
      for (int64_t r0 = 0; r0 < n; r0 += chunk)
        cpu::PackedMatMul(x + r0 * w.cols, std::min(chunk, n - r0), w, bias, y + r0 * w.rows);
      return;
    }
    cpu::PackedMatMul(x, n, w, bias, y);
  }
  void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
            const float* inv_freq, float attn_factor) override {
    cpu::Rope(x, rows, heads, head_dim, positions, inv_freq, attn_factor);
  }
  void SiluMul(const float* gate, const float* up, int64_t n, float* out) override {
    cpu::SiluMul(gate, up, n, out);
  }
  void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                 const AttentionParams& p, float* out) override {
    kernels::Attention(q, n, pos0, kv, p, out);
  }
  void CompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                           const AttentionParams& p, float* out) override {
    kernels::CompressedAttention(q, n, pos0, kv, p, out);
  }

 protected:
  void DequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out) override {
    cpu::PackedDequantizeRows(w, r0, count, out);
  }
};

}  // namespace

Backend& CpuBackend() {
  static CpuBackendImpl backend;
  return backend;
}

}  // namespace tq::kernels
