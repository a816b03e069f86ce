// What the ref and cpu backends share (internal to kernels/): host memory (Allocate is an
// aligned allocation, Upload a view of the caller's bytes, Download/Copy are memcpy/memmove,
// nothing to synchronize) and the ops whose host code is the same for both (embedding rows,
// add, rotation, KV store and encode, MoE routing, gather/scatter, argmax). The two differ in the
// compute ops (matmuls, norms, RoPE, attention), which they override.
#pragma once

#include <atomic>

#include "kernels/backend.h"

namespace tq::kernels {

class HostBackend : public Backend {
 public:
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  void MemoryInfo(size_t* free_bytes, size_t* total_bytes) const override {
    *free_bytes = 0;
    *total_bytes = 0;
  }

  DeviceBuffer Allocate(size_t bytes, std::string_view what) override;
  int64_t AllocatedBytes() const override { return allocated_.load(std::memory_order_relaxed); }
  DeviceBuffer Upload(const void* host, size_t bytes, std::string_view what) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void Download(void* dst, const void* src, size_t bytes) override;
  void Synchronize() override {}
  void Copy(void* dst, const void* src, size_t bytes) override;

  void EmbedRows(const TensorView& table, const int32_t* ids, int64_t n, float* out) override;
  void PackedEmbedRows(const PackedMatrix& w, const int32_t* ids, int64_t n, float* out) override;
  void Add(float* y, const float* x, int64_t n) override;
  void Rotate(const RotationView& r, const float* x, int64_t rows, float* out) override;
  void KvStore(const float* src, int64_t n, int64_t heads, int64_t head_dim, void* dst, DType dtype,
               int64_t head_stride, int64_t slot0) override;
  void KvEncode(const KvEncodeParams& p, const void* src, DType src_dtype, int64_t n, int64_t heads,
                int64_t pos_stride, int64_t head_stride, const KvCodeSlots& dst,
                int64_t slot0) override;
  void CenterRows(float* x, int64_t rows, int64_t width, float* mean, int64_t mean_rows) override;
  void GatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                     int64_t period, float* out) override;
  void MoeRoute(const float* logits, int64_t n, const MoeRouting& r, int32_t* chosen,
                float* weight) override;
  void GatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim,
                  float* dst) override;
  void ScatterAddRows(const float* src, const int32_t* rows, const float* weight, int64_t count,
                      int64_t dim, float* dst) override;
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override;
  float* RotationScratch(int64_t count) override;

  // The family ops: the scalar references on `ref`, the fast CPU paths on `cpu`
  // (activation_ops.h, attention_variant_ops.h; chosen by name() so neither backend file
  // changes).
  bool SupportsFamilyOp(FamilyOp op) const override { return op != FamilyOp::kCount; }
  void Scale(float* x, int64_t n, float s) override;
  void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) override;
  void ClampedSwiglu(const float* gate, const float* up, int64_t n, const ClampedSwigluParams& p,
                     float* out) override;
  void Softcap(float* x, int64_t n, float cap) override;
  void SigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim) override;
  void AttentionVariant(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                        const SinkAttentionParams& p, float* out) override;
  // The recurrent mixers' ops (host_backend_recurrent.cc).
  void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                    float* state, const Conv1dParams& p, float* y) override;
  void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                     const float* beta, int64_t n, float* state, const DeltaNetParams& p,
                     float* out) override;
  void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
           const float* D, int64_t n, float* state, const SsdParams& p, float* y) override;
  void DeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n, int64_t heads,
                     const float* a_log, const float* dt_bias, float* g, float* beta) override;
  void GatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group, const float* z,
                    const float* weight, float eps, bool gate_first, float* out) override;
  void SsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads, const float* bias, float lo,
             float hi, float* out) override;
  void Relu2(const float* x, int64_t n, float* out) override;
  void PartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                   const int64_t* positions, const float* inv_freq, float attn_factor) override;
  void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p,
                  float* y) override;

 protected:
  // Rows r0 .. r0+count-1 of the dequantized packed matrix (the ref or the cpu decoder).
  virtual void DequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out) = 0;

 private:
  friend void FreeHostBlock(void* p, void* ctx);
  std::atomic<int64_t> allocated_{0};  // bytes of Allocate's live buffers (AllocatedBytes)
};

}  // namespace tq::kernels
