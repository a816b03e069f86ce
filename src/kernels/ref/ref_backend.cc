// The ref backend: host memory and the scalar oracle for every op (kernels/ref/).
#include "core/error.h"
#include "kernels/host_backend.h"
#include "kernels/ref/ref_kernels.h"

namespace tq::kernels {
namespace {

class RefBackendImpl final : public HostBackend {
 public:
  std::string_view name() const override { return "ref"; }
  std::string Describe() const override { return "ref (scalar reference kernels)"; }
  bool Supports(Op) const override { return true; }

  void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
               float* out) override {
    ref::RmsNorm(x, rows, dim, weight, eps, out);
  }
  void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias,
              float* y) override {
    if (n > 0) ref::MatMul(x, n, w, bias, y);
  }
  void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) override {
    if (n > 0) ref::MatMulGroup(x, n, outs);
  }
  void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                    float* y) override {
    ref::PackedMatMul(x, n, w, bias, y);
  }
  void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
            const float* inv_freq, float attn_factor) override {
    ref::Rope(x, rows, heads, head_dim, positions, inv_freq, attn_factor);
  }
  void SiluMul(const float* gate, const float* up, int64_t n, float* out) override {
    ref::SiluMul(gate, up, n, out);
  }
  void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                 const AttentionParams& p, float* out) override {
    TQ_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.head_dim > 0, "attention",
             "bad head counts {} / {} (head_dim {})", p.num_heads, p.num_kv_heads, p.head_dim);
    if (n > 0) ref::Attention(q, n, pos0, kv, p, out);
  }
  void CompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                           const AttentionParams& p, float* out) override {
    if (n <= 0) return;
    CheckCompressedKvView(kv, p, pos0 + n, "compressed attention");
    RefCompressedAttention(q, n, pos0, kv, p, out);
  }

 protected:
  void DequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out) override {
    ref::PackedDequantizeRows(w, r0, count, out);
  }
};

}  // namespace

Backend& RefBackend() {
  static RefBackendImpl backend;
  return backend;
}

}  // namespace tq::kernels
