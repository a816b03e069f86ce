#include "kernels/host_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/activation_ops.h"
#include "kernels/attention_variant_ops.h"
#include "quant/hadamard.h"

namespace tq::kernels {
namespace {

// Allocate's blocks carry their size in a 64-byte header (keeps the payload 64-byte aligned), so
// that the free can take it off the backend's count.
constexpr size_t kAlign = 64;

}  // namespace

void FreeHostBlock(void* p, void* ctx) {
  char* base = static_cast<char*>(p) - kAlign;
  size_t bytes;
  std::memcpy(&bytes, base, sizeof(bytes));
  static_cast<HostBackend*>(ctx)->allocated_.fetch_sub(int64_t(bytes), std::memory_order_relaxed);
  std::free(base);
}

DeviceBuffer HostBackend::Allocate(size_t bytes, std::string_view what) {
  if (bytes == 0) return {};
  char* base = static_cast<char*>(
      std::aligned_alloc(kAlign, kAlign + (bytes + kAlign - 1) / kAlign * kAlign));
  TQ_CHECK(base != nullptr, name(), "out of host memory allocating {} bytes for {}", bytes, what);
  std::memcpy(base, &bytes, sizeof(bytes));
  allocated_.fetch_add(int64_t(bytes), std::memory_order_relaxed);
  return DeviceBuffer(base + kAlign, bytes, MemorySpace::kHost, FreeHostBlock, this);
}

DeviceBuffer HostBackend::Upload(const void* host, size_t bytes, std::string_view) {
  return DeviceBuffer::View(host, bytes, MemorySpace::kHost);
}

void HostBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void HostBackend::Download(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) std::memcpy(dst, src, bytes);
}

void HostBackend::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) std::memmove(dst, src, bytes);
}

void HostBackend::EmbedRows(const TensorView& table, const int32_t* ids, int64_t n, float* out) {
  const int64_t dim = table.dim(1);
  for (int64_t r = 0; r < n; ++r) ToF32(table, int64_t(ids[r]) * dim, dim, out + r * dim);
}

void HostBackend::PackedEmbedRows(const PackedMatrix& w, const int32_t* ids, int64_t n,
                                  float* out) {
  for (int64_t r = 0; r < n; ++r) DequantizeRows(w, ids[r], 1, out + r * w.cols);
}

void HostBackend::Add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void HostBackend::Rotate(const RotationView& r, const float* x, int64_t rows, float* out) {
  if (out != x) std::memcpy(out, x, size_t(rows * r.dim) * sizeof(float));
  quant::RotateRowsForward(r.signs, r.dim, r.block, out, rows);
}

void HostBackend::KvStore(const float* src, int64_t n, int64_t heads, int64_t head_dim, void* dst,
                          DType dtype, int64_t head_stride, int64_t slot0) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t o = h * head_stride + (slot0 + i) * head_dim;
      const float* s = src + (i * heads + h) * head_dim;
      switch (dtype) {
        case DType::F32:
          std::memcpy(static_cast<float*>(dst) + o, s, size_t(head_dim) * sizeof(float));
          break;
        case DType::F16:
          F32ToF16(s, static_cast<uint16_t*>(dst) + o, size_t(head_dim));
          break;
        case DType::BF16:
          F32ToBf16(s, static_cast<uint16_t*>(dst) + o, size_t(head_dim));
          break;
        default:
          Fail(name(), "kv store: unsupported cache dtype {}", DTypeName(dtype));
      }
    }
  }
}

void HostBackend::KvEncode(const KvEncodeParams& p, const void* src, DType src_dtype, int64_t n,
                           int64_t heads, int64_t pos_stride, int64_t head_stride,
                           const KvCodeSlots& dst, int64_t slot0) {
  TQ_CHECK(src_dtype == DType::F32 || src_dtype == DType::F16, name(),
           "kv encode: source dtype {} (expected f32 or f16)", DTypeName(src_dtype));
  const KvCodeFormat& f = p.format;
  TQ_CHECK(f.dim > 0 && f.dim <= 1024 && f.group > 0 && f.dim % f.group == 0, name(),
           "kv encode: dim {} with group {}", f.dim, f.group);
  // In parallel over (position, head) vectors, as the cache coded them before this op.
  ThreadPool::Global().ParallelFor(n * heads, 8, [&](int64_t t0, int64_t t1) {
    float x[1024], back[1024];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / heads, h = t % heads, at = i * pos_stride + h * head_stride;
      if (src_dtype == DType::F32)
        std::memcpy(x, static_cast<const float*>(src) + at, size_t(f.dim) * sizeof(float));
      else
        F16ToF32(static_cast<const uint16_t*>(src) + at, x, size_t(f.dim));
      const int64_t slot = h * dst.head_stride + slot0 + i;
      uint8_t* codes = dst.codes + slot * f.code_bytes;
      uint16_t* scales = dst.scales + slot * f.groups();
      EncodeKvVector(f, p.scale, x, codes, scales);
      if (!p.qjl_matrix) continue;
      DecodeKvVector(f, codes, scales, back);
      for (int64_t j = 0; j < f.dim; ++j) back[j] = x[j] - back[j];  // the residual
      EncodeQjlResidual(p.qjl_matrix, p.qjl_m, f.dim, back,
                        dst.qjl_bits + slot * QjlSignBytes(p.qjl_m), dst.qjl_norm + slot);
    }
  });
}

void HostBackend::CenterRows(float* x, int64_t rows, int64_t width, float* mean,
                             int64_t mean_rows) {
  if (mean_rows > 0) {
    std::fill(mean, mean + width, 0.0f);
    for (int64_t t = 0; t < mean_rows; ++t)
      for (int64_t j = 0; j < width; ++j) mean[j] += x[t * width + j];
    for (int64_t j = 0; j < width; ++j) mean[j] /= float(mean_rows);
  }
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < width; ++j) x[t * width + j] -= mean[j];
}

void HostBackend::GatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                                int64_t period, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* o = order + (r % period) * dim;
    for (int64_t j = 0; j < dim; ++j) out[r * dim + j] = x[r * dim + o[j]];
  }
}

void HostBackend::MoeRoute(const float* logits, int64_t n, const MoeRouting& r, int32_t* chosen,
                           float* weight) {
  thread_local std::vector<float> p;
  p.resize(size_t(r.num_experts));
  for (int64_t row = 0; row < n; ++row) {
    std::memcpy(p.data(), logits + row * r.num_experts, size_t(r.num_experts) * sizeof(float));
    Softmax(p.data(), r.num_experts);  // over all experts, in fp32
    int32_t* sel = chosen + row * r.top_k;
    float* wt = weight + row * r.top_k;
    TopK(p.data(), r.num_experts, r.top_k, sel);
    float sum = 0;
    for (int64_t j = 0; j < r.top_k; ++j) sum += (wt[j] = p[size_t(sel[j])]);
    if (r.renormalize)
      for (int64_t j = 0; j < r.top_k; ++j) wt[j] /= sum;
  }
}

void HostBackend::GatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim,
                             float* dst) {
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(dst + i * dim, src + int64_t(rows[i]) * dim, size_t(dim) * sizeof(float));
}

void HostBackend::ScatterAddRows(const float* src, const int32_t* rows, const float* weight,
                                 int64_t count, int64_t dim, float* dst) {
  for (int64_t i = 0; i < count; ++i) {
    float* d = dst + int64_t(rows[i]) * dim;
    const float w = weight[i];
    const float* s = src + i * dim;
    for (int64_t j = 0; j < dim; ++j) d[j] += w * s[j];
  }
}

void HostBackend::Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = int32_t(kernels::Argmax(x + r * n, n));
}

float* HostBackend::RotationScratch(int64_t count) {
  thread_local AlignedBuffer<float> buf;
  if (buf.size() < size_t(count)) buf.resize(size_t(count));
  return buf.data();
}

// --- family ops ---

void HostBackend::Scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void HostBackend::GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  if (name() == "ref") {
    ref::GeluTanhMul(gate, up, n, out);
  } else {
    cpu::GeluTanhMul(gate, up, n, out);
  }
}

void HostBackend::ClampedSwiglu(const float* gate, const float* up, int64_t n,
                                const ClampedSwigluParams& p, float* out) {
  if (name() == "ref") {
    ref::ClampedSwiglu(gate, up, n, p, out);
  } else {
    cpu::ClampedSwiglu(gate, up, n, p, out);
  }
}

void HostBackend::Softcap(float* x, int64_t n, float cap) {
  if (name() == "ref") {
    ref::Softcap(x, n, cap);
  } else {
    cpu::Softcap(x, n, cap);
  }
}

void HostBackend::SigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float s = 1.0f / (1.0f + std::exp(-g[r]));
    for (int64_t i = 0; i < dim; ++i) x[r * dim + i] *= s;
  }
}

void HostBackend::HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p,
                             float* y) {
  if (name() == "ref") {
    ref::HeadMatMul(x, n, w, p, y);
  } else {
    cpu::HeadMatMul(x, n, w, p, y);
  }
}

void HostBackend::AttentionVariant(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                                   const SinkAttentionParams& p, float* out) {
  TQ_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.head_dim > 0,
           "attention variant", "bad head counts {} / {} (head_dim {})", p.num_heads,
           p.num_kv_heads, p.head_dim);
  if (name() == "ref") {
    ref::AttentionVariantKv(q, n, pos0, kv, p, out);
  } else {
    cpu::AttentionVariantKv(q, n, pos0, kv, p, out);
  }
}

}  // namespace tq::kernels
