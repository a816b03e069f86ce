// CudaBackend: the Backend of kernels/backend.h on one NVIDIA GPU. It owns a non-blocking
// stream (every op is enqueued on it, in order), a device error word that kernels set on bad
// input (token ids outside the table) and that every sync point checks, and scratch buffers that
// only grow (the rotation scratch, the overlap buffer of Copy) so device addresses stay stable for
// CUDA graphs. Argument checks run on the host before anything is enqueued; they never read
// device memory.
#include "kernels/cuda/cuda_backend.h"

#if !defined(TQ_CUDA_EMU)
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numbers>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cuda_step_graph.h"
#include "kernels/cuda/cuda_views.h"
#include "kernels/cuda/launch.h"
#include "kernels/device_pool.h"
#include "quant/format.h"
#include "quant/hadamard_blocks.h"

namespace tq::kernels {
namespace {

using cuda::CheckHeads;
using cuda::CheckPlainKv;
using cuda::Dev;
using cuda::DevPacked;
using cuda::Elem;
using cuda::GroupViews;
using cuda::kMaxGroupViews;
using cuda::ToDev;

constexpr double kMiB = 1024.0 * 1024.0;

Elem ElemOf(DType dt, const std::string& where) {
  switch (dt) {
    case DType::F32:
      return Elem::kF32;
    case DType::F16:
      return Elem::kF16;
    case DType::BF16:
      return Elem::kBF16;
    default:
      Fail(where, "unsupported dtype {} (F32, F16 or BF16)", DTypeName(dt));
  }
}

// Many-token products (n > 8) on the tensor cores: bf16 operands, fp32 accumulation (cuBLAS).
//   auto    dense bf16 weights with x split into hi + lo bf16 (two GEMMs: fp32-grade activations,
//           as the CPU's AMX path does for dense weights); packed weights dequantized to bf16
//           and x rounded to bf16 once (as the CPU's AMX path does for packed weights);
//   bf16    x rounded once for both; bf16x2: x split for both;
//   exact   no bf16: packed on the 3xTF32 kernel, dense on the fp32 SIMT kernel (fp32 class).
// TURBOQUANT_CUDA_GEMM selects one (default auto); it is read at each many-token product (a getenv
// next to a GEMM launch), so a process can compare the modes on one backend.
enum class GemmMode { kAuto, kBf16, kBf16x2, kExact };

GemmMode GemmModeFromEnv() {
  const char* v = std::getenv("TURBOQUANT_CUDA_GEMM");
  const std::string m = v ? v : "";
  if (m.empty() || m == "auto") return GemmMode::kAuto;
  if (m == "bf16") return GemmMode::kBf16;
  if (m == "bf16x2") return GemmMode::kBf16x2;
  if (m == "exact") return GemmMode::kExact;
  Fail("TURBOQUANT_CUDA_GEMM", "'{}' is not a GEMM mode (auto, bf16, bf16x2 or exact)", m);
}

// Products of more tokens than this go to the tensor-core GEMM (matmul.cu's matvec takes <= 8).
constexpr int64_t kMaxMatVecTokens = 8;
// Packed weights are dequantized for the GEMM in row chunks of at most this many bf16 elements
// (128 MiB: every matrix of an 8B model but the LM head in one chunk; cuBLAS picked a split-K
// sm80 kernel at ~250 TFLOP/s for half of an 8B down projection where the whole ran at ~700).
constexpr int64_t kDequantChunkElems = int64_t(64) << 20;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    name_ = "cuda:" + std::to_string(device);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    cudaGetLastError();
    TQ_CHECK(device >= 0 && device < count, name_, "no such CUDA device ({} visible)", count);
    Check(cudaSetDevice(device_), "cudaSetDevice");
    cudaDeviceProp prop{};
    Check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    device_name_ = prop.name;
    cc_major_ = prop.major;
    cc_minor_ = prop.minor;
    total_ = prop.totalGlobalMem;
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    graphs_ = std::make_unique<cuda::StepGraphs>(stream_);
    Check(cudaMalloc(&err_, sizeof(cuda::DeviceError)), "cudaMalloc (error word)");
    Check(cudaMemset(err_, 0, sizeof(cuda::DeviceError)), "cudaMemset");
    // A bad TURBOQUANT_CUDA_GEMM fails here, before any work; cuBLAS is set up now (it loads a
    // large library and its kernels: a cost for the process, not for its first prompt).
    if (GemmModeFromEnv() != GemmMode::kExact) BlasReady();
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    FreeRetired();
    graphs_.reset();
    cuda::DestroyBlas(blas_);
    cudaFree(err_);  // the scratch buffers go with pool_
    for (auto& s : signs_) cudaFree(s.device);
    if (copy_queue_) {
      cudaStreamSynchronize(copy_stream_);
      for (cudaEvent_t e : copy_events_) cudaEventDestroy(e);
      cudaEventDestroy(order_event_);
      cudaStreamDestroy(copy_stream_);
    }
    cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return name_; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  bool Supports(Op op) const override { return op != Op::kCount; }
  std::string Describe() const override {
    return fmt::format("{} {}, {:.0f} GiB, sm_{}{}", name_, device_name_,
                       double(total_) / (kMiB * 1024.0), cc_major_, cc_minor_);
  }

  // --- memory ---
  DeviceBuffer Allocate(size_t bytes, std::string_view what) override {
    Enter();
    if (bytes == 0) return DeviceBuffer(nullptr, 0, MemorySpace::kDevice, nullptr, nullptr);
    void* p = DeviceMalloc(bytes, what);
    return DeviceBuffer(p, bytes, MemorySpace::kDevice, &FreeDevice, this);
  }

  // What the pool holds from the device (slabs and large blocks), not only what was asked for.
  int64_t AllocatedBytes() const override {
    std::lock_guard lock(mem_mu_);
    return pool_.held();
  }
  int64_t PeakAllocatedBytes() const override {
    std::lock_guard lock(mem_mu_);
    return pool_.peak_held();
  }
  void SetMemoryLimit(int64_t bytes) override {
    std::lock_guard lock(mem_mu_);
    TQ_CHECK(bytes >= 0, name_, "--gpu-memory-limit must not be negative");
    TQ_CHECK(bytes == 0 || bytes >= pool_.held(), name_,
             "--gpu-memory-limit {:.1f} MiB is below the {:.1f} MiB this process already holds "
             "on the device",
             double(bytes) / kMiB, double(pool_.held()) / kMiB);
    pool_.set_limit(bytes);
  }
  int64_t MemoryLimit() const override {
    std::lock_guard lock(mem_mu_);
    return pool_.limit();
  }

  DeviceBuffer AllocatePinnedHost(size_t bytes, std::string_view what) override {
    Enter();
    if (bytes == 0) return {};
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      cudaGetLastError();
      Fail(name_, "cannot pin {:.1f} MiB of host memory for {} ({})", double(bytes) / kMiB, what,
           cudaGetErrorString(e));
    }
    return DeviceBuffer(
        p, bytes, MemorySpace::kHost, [](void* q, void*) { cudaFreeHost(q); }, nullptr);
  }

  bool HasCopyQueue() const override { return true; }

  // The copy stream waits for an event recorded on the compute stream now (so the copy never
  // overwrites what a queued kernel reads), copies, and records the ticket's event. Events are
  // reused round-robin: waiting on a reused one waits for a later copy, which finishes after
  // the ticket's own (one in-order stream), so it is only ever too cautious.
  uint64_t CopyAhead(void* dst, const void* src, size_t bytes) override {
    Enter();
    graphs_->Finish();  // (not inside a recorded step)
    if (!copy_queue_) {
      copy_queue_ = true;
      Check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "copy stream");
      Check(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming), "copy events");
      for (cudaEvent_t& e : copy_events_)
        Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "copy events");
    }
    Check(cudaEventRecord(order_event_, stream_), "copy ahead");
    Check(cudaStreamWaitEvent(copy_stream_, order_event_, 0), "copy ahead");
    if (bytes)
      Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_stream_), "copy ahead");
    const uint64_t ticket = ++copy_tickets_;
    Check(cudaEventRecord(copy_events_[ticket % kCopyEvents], copy_stream_), "copy ahead");
    return ticket;
  }

  void WaitCopy(uint64_t ticket) override {
    if (ticket == 0) return;
    TQ_CHECK(ticket <= copy_tickets_, name_, "no copy has ticket {}", ticket);
    Enter();
    Check(cudaStreamWaitEvent(stream_, copy_events_[ticket % kCopyEvents], 0), "wait for copy");
  }

  DeviceBuffer Upload(const void* host, size_t bytes, std::string_view what) override {
    graphs_->Finish();  // (a sync point)
    DeviceBuffer b = Allocate(bytes, what);
    if (bytes) {
      // Ordered after everything queued (the buffer may be read by the next op).
      Check(cudaMemcpyAsync(b.data(), host, bytes, cudaMemcpyHostToDevice, stream_), "upload");
      Check(cudaStreamSynchronize(stream_), "upload");
    }
    return b;
  }

  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    Enter();
    if (bytes && graphs_->capturing()) src = graphs_->Stage(src, bytes);  // read at the launch
    if (bytes)
      Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
  }

  void Download(void* dst, const void* src, size_t bytes) override {
    Enter();
    graphs_->Finish();
    if (bytes) Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "download");
    SyncAndCheck("download");
  }

  void Synchronize() override {
    Enter();
    graphs_->Finish();
    SyncAndCheck("synchronize");
  }

  void MemoryInfo(size_t* free_bytes, size_t* total_bytes) const override {
    cudaSetDevice(device_);
    size_t f = 0, t = 0;
    Check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
  }

  // --- ops ---
  void EmbedRows(const TensorView& table, const int32_t* ids, int64_t n, float* out) override {
    const std::string where = name_ + " embed rows";
    TQ_CHECK(table.rank() == 2, where, "table must be 2-D, got {}", ShapeToString(table.shape));
    if (n <= 0 || table.dim(1) == 0) return;
    Enter();
    cuda::LaunchEmbedRows(table.data, ElemOf(table.dtype, where), table.dim(0), table.dim(1), ids,
                          n, out, err_, stream_);
    Launched(where);
  }

  void PackedEmbedRows(const PackedMatrix& w, const int32_t* ids, int64_t n, float* out) override {
    const std::string where = name_ + " packed embed rows";
    if (n <= 0) return;
    const DevPacked d = ToDev(w, where);
    Enter();
    cuda::LaunchPackedEmbedRows(d, ids, n, out, err_, stream_);
    Launched(where);
  }

  void Add(float* y, const float* x, int64_t n) override {
    if (n <= 0) return;
    Enter();
    cuda::LaunchAdd(y, x, n, stream_);
    Launched("add");
  }

  void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
               float* out) override {
    if (rows <= 0) return;
    TQ_CHECK(dim > 0, name_ + " rms norm", "dim {}", dim);
    Enter();
    cuda::LaunchRmsNorm(x, rows, dim, weight, eps, out, stream_);
    Launched("rms norm");
  }

  void AddRmsNorm(float* x, const float* y, int64_t rows, int64_t dim, const float* weight,
                  float eps, float* out) override {
    if (rows <= 0) return;
    TQ_CHECK(dim > 0, name_ + " add rms norm", "dim {}", dim);
    Enter();
    cuda::LaunchAddRmsNorm(x, y, rows, dim, weight, eps, out, stream_);
    Launched("add rms norm");
  }

  void Rotate(const RotationView& r, const float* x, int64_t rows, float* out) override {
    const std::string where = name_ + " rotate";
    CheckRotation(r, where);
    if (rows <= 0) return;
    Enter();
    cuda::LaunchRotate(DevRot(r), x, rows, out, stream_);
    Launched(where);
  }

  void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias,
              float* y) override {
    const std::string where = name_ + " matmul";
    TQ_CHECK(w.rank() == 2, where, "weight must be 2-D, got {}", ShapeToString(w.shape));
    const Elem e = ElemOf(w.dtype, where);
    if (n <= 0) return;
    Enter();
    const GemmMode mode = n > kMaxMatVecTokens ? GemmModeFromEnv() : GemmMode::kExact;
    if (e == Elem::kBF16 && mode != GemmMode::kExact && BlasReady()) {
      const auto* wb = static_cast<const uint16_t*>(w.data);
      const int64_t in = w.dim(1);
      TensorCoreProduct(x, n, in, w.dim(0), in, mode != GemmMode::kBf16, /*convert=*/true, bias, y,
                        where, [&](int64_t r0, int64_t) { return wb + r0 * in; });
      return;
    }
    cuda::LaunchDenseMatMul(x, n, {w.data, e, w.dim(0), w.dim(1)}, bias, y, stream_);
    Launched(where);
  }

  void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) override {
    const std::string where = name_ + " matmul group";
    TQ_CHECK(outs.size() <= 16, where, "{} outputs (at most 16)", outs.size());
    for (const MatMulOutput& o : outs) {
      TQ_CHECK(o.w && o.y && o.w->rank() == 2 && o.w->dim(1) == outs[0].w->dim(1), where,
               "every output needs a 2-D weight with the same inner dimension");
    }
    for (const MatMulOutput& o : outs) MatMul(x, n, *o.w, o.bias, o.y);
  }

  void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                    float* y) override {
    const std::string where = name_ + " packed matmul";
    const DevPacked d = ToDev(w, where);
    if (n <= 0) return;
    Enter();
    const GemmMode mode = n > kMaxMatVecTokens ? GemmModeFromEnv() : GemmMode::kExact;
    if (mode != GemmMode::kExact && BlasReady()) {
      PackedTensorCore(x, n, d, bias, y, mode == GemmMode::kBf16x2, /*convert=*/true, where);
      return;
    }
    cuda::LaunchPackedMatMul(x, n, d, bias, y, stream_);
    Launched(where);
  }

  // One token through q4 / q2 rows: the rotation inside the tensor-core product's launch
  // (matvec_mma.cu); otherwise the default (rotate, then PackedMatMulGroup).
  void RotatedPackedMatMulGroup(const RotationView& r, const float* x, int64_t n,
                                std::span<const PackedMatMulOutput> outs) override {
    const std::string where = name_ + " rotated packed matmul group";
    if (n == 1 && !outs.empty() && outs.size() <= kMaxGroupViews) {
      CheckRotation(r, where);
      GroupViews v;
      ToDev(outs, v, where);
      for (size_t i = 0; i < outs.size(); ++i)
        TQ_CHECK(v.ws[i].cols == r.dim, where, "rotation of {} for {} inputs", r.dim, v.ws[i].cols);
      Enter();
      const cuda::DevRotation dr = DevRot(r);
      if (cuda::MmaPackedMatVec(x, v.ws, v.biases, v.ys, int(outs.size()), &dr, stream_)) {
        Launched(where);
        return;
      }
    }
    Backend::RotatedPackedMatMulGroup(r, x, n, outs);
  }

  void PackedMatMulGroup(const float* x, int64_t n,
                         std::span<const PackedMatMulOutput> outs) override {
    const std::string where = name_ + " packed matmul group";
    if (n <= 0 || outs.empty()) return;
    if (n <= kMaxMatVecTokens && outs.size() > kMaxGroupViews) {
      // A MoE layer's experts over one token: launches of kMaxGroupViews members each.
      for (size_t i = 0; i < outs.size(); i += kMaxGroupViews)
        PackedMatMulGroup(x, n, outs.subspan(i, std::min(kMaxGroupViews, outs.size() - i)));
      return;
    }
    if (outs.size() <= kMaxGroupViews) {
      GroupViews v;
      ToDev(outs, v, where);
      Enter();
      if (cuda::FastPackedMatVecGroup(x, n, v.ws, v.biases, v.ys, int(outs.size()), stream_)) {
        Launched(where);
        return;
      }
    }
    const GemmMode mode = n > kMaxMatVecTokens ? GemmModeFromEnv() : GemmMode::kExact;
    if (mode != GemmMode::kExact && BlasReady()) {
      // x to bf16 once for every member (they share it; each is then dequantized and multiplied).
      int64_t converted_cols = -1;
      for (const PackedMatMulOutput& o : outs) {
        TQ_CHECK(o.w && o.y, where, "an output has no weight or no destination");
        const DevPacked d = ToDev(*o.w, where);
        PackedTensorCore(x, n, d, o.bias, o.y, mode == GemmMode::kBf16x2,
                         /*convert=*/d.cols != converted_cols, where);
        converted_cols = d.cols;
      }
      return;
    }
    for (const PackedMatMulOutput& o : outs) PackedMatMul(x, n, *o.w, o.bias, o.y);
  }

  void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
            const float* inv_freq, float attn_factor) override {
    TQ_CHECK(head_dim > 0 && head_dim % 2 == 0, name_ + " rope", "head_dim {} must be even",
             head_dim);
    if (rows <= 0 || heads <= 0) return;
    Enter();
    cuda::LaunchRope(x, rows, heads, head_dim, positions, inv_freq, attn_factor, stream_);
    Launched("rope");
  }

  void SiluMul(const float* gate, const float* up, int64_t n, float* out) override {
    if (n <= 0) return;
    Enter();
    cuda::LaunchSiluMul(gate, up, n, out, stream_);
    Launched("silu mul");
  }

  void SiluMulRotate(const float* gate, const float* up, int64_t rows, const RotationView& r,
                     float* out) override {
    const std::string where = name_ + " silu mul rotate";
    CheckRotation(r, where);
    if (rows <= 0) return;
    Enter();
    cuda::LaunchRotate(DevRot(r), gate, rows, out, stream_, up);
    Launched(where);
  }

  void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                 const AttentionParams& p, float* out) override {
    const std::string where = name_ + " attention";
    CheckHeads(p, where);
    const Elem e = ElemOf(kv.dtype, where);
    if (!CheckPlainKv(kv, pos0, n, p.num_kv_heads, p.head_dim, where)) return;
    Enter();
    const int64_t scratch = cuda::AttentionScratchFloats(n, pos0, e, Dev(p));
    float* part =
        scratch == 0
            ? nullptr
            : static_cast<float*>(Grow(&attn_scratch_, &attn_scratch_bytes_,
                                       size_t(scratch) * sizeof(float), "attention split scratch"));
    cuda::LaunchAttention(q, n, pos0, kv.k, kv.v, e, kv.head_stride, Dev(p), part, out, stream_);
    Launched(where);
  }

  void CompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                           const AttentionParams& p, float* out) override {
    const std::string where = name_ + " compressed attention";
    CheckHeads(p, where);
    if (n <= 0) return;
    // The shared checks, minus the channel-order contents (device memory, never read here).
    CompressedKvView shape = kv;
    shape.k_order = shape.v_order = nullptr;
    CheckCompressedKvView(shape, p, pos0 + n, where.c_str());
    cuda::DevCompressedKv d;
    d.k_rot = {DeviceSigns(*kv.k_rotation), kv.k_rotation->dim(), kv.k_rotation->block()};
    d.v_rot = {DeviceSigns(*kv.v_rotation), kv.v_rotation->dim(), kv.v_rotation->block()};
    d.kf = ToDev(kv.k_format);
    d.vf = ToDev(kv.v_format);
    d.num_spans = kv.num_spans;
    for (int i = 0; i < kv.num_spans; ++i) {
      const KvSpan& s = kv.spans[i];
      d.spans[i] = {s.begin,   s.end,     s.head_stride, s.coded ? 1 : 0, s.k16,   s.v16,
                    s.k_codes, s.v_codes, s.k_scales,    s.v_scales,      s.k_qjl, s.k_qjl_norm};
    }
    d.v_offset = kv.v_offset;
    d.qjl_matrix = kv.qjl_matrix;
    d.qjl_m = kv.qjl_matrix ? kv.qjl_m : 0;
    d.qjl_factor = kv.qjl_matrix ? float(QjlFactor(kv.qjl_m)) : 0.0f;
    d.k_order = kv.k_order;
    d.v_order = kv.v_order;
    Enter();
    const int64_t scratch = cuda::CompressedAttentionScratchFloats(n, pos0, d, Dev(p));
    float* part =
        scratch == 0
            ? nullptr
            : static_cast<float*>(Grow(&attn_scratch_, &attn_scratch_bytes_,
                                       size_t(scratch) * sizeof(float), "attention split scratch"));
    cuda::LaunchCompressedAttention(q, n, pos0, d, Dev(p), part, out, stream_);
    Launched(where);
  }

  void KvStore(const float* src, int64_t n, int64_t heads, int64_t head_dim, void* dst, DType dtype,
               int64_t head_stride, int64_t slot0) override {
    Store(src, nullptr, n, heads, head_dim, dst, nullptr, dtype, head_stride, slot0);
  }
  void KvStorePair(const float* k, const float* v, int64_t n, int64_t heads, int64_t head_dim,
                   void* k_dst, void* v_dst, DType dtype, int64_t head_stride,
                   int64_t slot0) override {
    Store(k, v, n, heads, head_dim, k_dst, v_dst, dtype, head_stride, slot0);
  }
  // KvStore (src2 null) or both of a pair in one launch.
  void Store(const float* src, const float* src2, int64_t n, int64_t heads, int64_t head_dim,
             void* dst, void* dst2, DType dtype, int64_t head_stride, int64_t slot0) {
    const std::string where = name_ + " kv store";
    const Elem e = ElemOf(dtype, where);
    TQ_CHECK(heads > 0 && head_dim > 0 && slot0 >= 0 &&
                 (heads == 1 || head_stride >= (slot0 + n) * head_dim),
             where, "slots {}..{} of head_dim {} do not fit a head stride of {}", slot0, slot0 + n,
             head_dim, head_stride);
    if (n <= 0) return;
    Enter();
    cuda::LaunchKvStore(src, src2, n, heads, head_dim, dst, dst2, e, head_stride, slot0, stream_);
    Launched(where);
  }

  void KvEncode(const KvEncodeParams& p, const void* src, DType src_dtype, int64_t n, int64_t heads,
                int64_t pos_stride, int64_t head_stride, const KvCodeSlots& dst,
                int64_t slot0) override {
    const std::string where = name_ + " kv encode";
    const cuda::DevKvEncodeJob job = EncodeJob(p, src, src_dtype, dst, where);
    if (n <= 0 || heads <= 0) return;
    Enter();
    cuda::LaunchKvEncode(job.p, src, src_dtype == DType::F16, n, heads, pos_stride, head_stride,
                         job.dst, slot0, stream_);
    Launched(where);
  }
  void KvEncodePair(const KvEncodeParams& kp, const void* ksrc, const KvCodeSlots& kdst,
                    const KvEncodeParams& vp, const void* vsrc, const KvCodeSlots& vdst,
                    DType src_dtype, int64_t n, int64_t heads, int64_t pos_stride,
                    int64_t head_stride, int64_t slot0) override {
    const std::string where = name_ + " kv encode pair";
    const cuda::DevKvEncodeJob k = EncodeJob(kp, ksrc, src_dtype, kdst, where);
    const cuda::DevKvEncodeJob v = EncodeJob(vp, vsrc, src_dtype, vdst, where);
    if (n <= 0 || heads <= 0) return;
    Enter();
    cuda::LaunchKvEncodePair(k, v, src_dtype == DType::F16, n, heads, pos_stride, head_stride,
                             slot0, stream_);
    Launched(where);
  }
  // One side of an encode, checked (KvEncode's contract, backend.h).
  static cuda::DevKvEncodeJob EncodeJob(const KvEncodeParams& p, const void* src, DType src_dtype,
                                        const KvCodeSlots& dst, const std::string& where) {
    const KvCodeFormat& f = p.format;
    TQ_CHECK(src_dtype == DType::F32 || src_dtype == DType::F16, where,
             "source dtype {} (expected f32 or f16)", DTypeName(src_dtype));
    TQ_CHECK(f.dim > 0 && f.dim <= 1024 && f.group > 0 && f.dim % f.group == 0, where,
             "dim {} with group {}", f.dim, f.group);
    for (int s = 0; s < f.num_segments; ++s) {
      const KvCodeSegment& g = f.segments[s];
      TQ_CHECK(g.levels && g.thresholds && g.format != quant::CodeFormat::kTernary, where,
               "segment {} has no levels / thresholds or is ternary", s);
    }
    TQ_CHECK(dst.codes && dst.scales && (!p.qjl_matrix || (dst.qjl_bits && dst.qjl_norm)), where,
             "missing destination arrays");
    TQ_CHECK(!p.qjl_matrix || (p.qjl_m > 0 && p.qjl_m <= 1024), where, "sketch of {} rows",
             p.qjl_m);
    cuda::DevKvEncodeJob j;
    j.p.f = ToDev(f);
    j.p.scale = int(p.scale);
    j.p.qjl_matrix = p.qjl_matrix;
    j.p.qjl_m = p.qjl_matrix ? p.qjl_m : 0;
    j.src = src;
    j.dst = {dst.codes, dst.scales, dst.qjl_bits, dst.qjl_norm, dst.head_stride};
    return j;
  }

  void CenterRows(float* x, int64_t rows, int64_t width, float* mean, int64_t mean_rows) override {
    TQ_CHECK(rows >= 0 && width > 0 && mean_rows >= 0 && mean_rows <= rows, name_ + " center rows",
             "{} rows of width {}, mean over {}", rows, width, mean_rows);
    Enter();
    cuda::LaunchCenterRows(x, rows, width, mean, mean_rows, stream_);
    Launched("center rows");
  }

  void GatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                     int64_t period, float* out) override {
    TQ_CHECK(dim > 0 && period > 0, name_ + " gather columns", "dim {}, period {}", dim, period);
    Enter();
    cuda::LaunchGatherColumns(x, rows, dim, order, period, out, stream_);
    Launched("gather columns");
  }

  void MoeRoute(const float* logits, int64_t n, const MoeRouting& r, int32_t* chosen,
                float* weight) override {
    TQ_CHECK(r.num_experts > 0 && r.top_k > 0 && r.top_k <= r.num_experts, name_ + " moe route",
             "top {} of {} experts", r.top_k, r.num_experts);
    if (n <= 0) return;
    Enter();
    cuda::LaunchMoeRoute(logits, n, r.num_experts, r.top_k, r.renormalize, chosen, weight, stream_);
    Launched("moe route");
  }

  void GatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim,
                  float* dst) override {
    if (count <= 0 || dim <= 0) return;
    Enter();
    cuda::LaunchGatherRows(src, rows, count, dim, dst, stream_);
    Launched("gather rows");
  }

  void ScatterAddRows(const float* src, const int32_t* rows, const float* weight, int64_t count,
                      int64_t dim, float* dst) override {
    if (count <= 0 || dim <= 0) return;
    Enter();
    cuda::LaunchScatterAddRows(src, rows, weight, count, dim, dst, stream_);
    Launched("scatter add rows");
  }

  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override {
    TQ_CHECK(n > 0, name_ + " argmax", "empty rows (n = {})", n);
    if (rows <= 0) return;
    Enter();
    cuda::LaunchArgmax(x, rows, n, out, stream_);
    Launched("argmax");
  }

  void Copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return;
    Enter();
    const auto* d = static_cast<const char*>(dst);
    const auto* s = static_cast<const char*>(src);
    if (d < s + bytes && s < d + bytes) {  // overlapping: through a scratch buffer (memmove)
      void* tmp = Grow(&copy_scratch_, &copy_scratch_bytes_, bytes, "copy scratch");
      Check(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
      Check(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
    } else {
      Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
    }
  }

  // --- the newer families' ops (family_ops.cu) ---
  bool SupportsFamilyOp(FamilyOp op) const override { return op != FamilyOp::kCount; }

  void Scale(float* x, int64_t n, float s) override {
    if (n <= 0) return;
    Enter();
    cuda::LaunchScale(x, n, s, stream_);
    Launched("scale");
  }
  void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) override {
    if (n <= 0) return;
    Enter();
    cuda::LaunchGeluTanhMul(gate, up, n, out, stream_);
    Launched("gelu tanh mul");
  }
  void ClampedSwiglu(const float* gate, const float* up, int64_t n, const ClampedSwigluParams& p,
                     float* out) override {
    if (n <= 0) return;
    Enter();
    cuda::LaunchClampedSwiglu(gate, up, n, p.alpha, p.limit, out, stream_);
    Launched("clamped swiglu");
  }
  void Softcap(float* x, int64_t n, float cap) override {
    TQ_CHECK(cap > 0, name_ + " softcap", "cap {} (must be > 0)", cap);
    if (n <= 0) return;
    Enter();
    cuda::LaunchSoftcap(x, n, cap, stream_);
    Launched("softcap");
  }
  void SigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim) override {
    if (rows <= 0 || dim <= 0) return;
    Enter();
    cuda::LaunchSigmoidGateRows(x, g, rows, dim, stream_);
    Launched("sigmoid gate rows");
  }
  void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p,
                  float* y) override {
    CheckHeadMatMul(p);
    if (n <= 0) return;
    Enter();
    cuda::LaunchHeadMatMul(x, n, w, {p.heads, p.in, p.out, p.x_stride, p.y_stride}, y, stream_);
    Launched("head matmul");
  }
  void Relu2(const float* x, int64_t n, float* out) override {
    if (n <= 0) return;
    Enter();
    cuda::LaunchRelu2(x, n, out, stream_);
    Launched("relu2");
  }
  void SsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads, const float* bias, float lo,
             float hi, float* out) override {
    if (n <= 0 || heads <= 0) return;
    TQ_CHECK(stride >= heads, name_ + " ssm dt", "stride {} < {} heads", stride, heads);
    Enter();
    cuda::LaunchSsmDt(dt, stride, n, heads, bias, lo, hi, out, stream_);
    Launched("ssm dt");
  }
  void DeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n, int64_t heads,
                     const float* a_log, const float* dt_bias, float* g, float* beta) override {
    if (n <= 0 || heads <= 0) return;
    TQ_CHECK(stride >= heads, name_ + " deltanet gates", "stride {} < {} heads", stride, heads);
    Enter();
    cuda::LaunchDeltaNetGates(b, a, stride, n, heads, a_log, dt_bias, g, beta, stream_);
    Launched("deltanet gates");
  }
  void GatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group, const float* z,
                    const float* weight, float eps, bool gate_first, float* out) override {
    if (rows <= 0) return;
    TQ_CHECK(group > 0 && dim % group == 0, name_ + " gated rms norm",
             "group {} does not divide dim {}", group, dim);
    Enter();
    cuda::LaunchGatedRmsNorm(x, rows, dim, group, z, weight, eps, gate_first, out, stream_);
    Launched("gated rms norm");
  }
  void PartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                   const int64_t* positions, const float* inv_freq, float attn_factor) override {
    TQ_CHECK(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim,
             name_ + " partial rope", "rotary_dim {} of head_dim {}", rotary_dim, head_dim);
    if (rows <= 0 || rotary_dim == 0) return;  // 0: no rotary channels (nemotron_h)
    Enter();
    cuda::LaunchPartialRope(x, rows, heads, head_dim, rotary_dim, positions, inv_freq, attn_factor,
                            stream_);
    Launched("partial rope");
  }
  void AttentionVariant(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                        const SinkAttentionParams& p, float* out) override {
    const std::string where = name_ + " attention variant";
    TQ_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.head_dim > 0 &&
                 p.head_dim <= cuda::kMaxHeadDim,
             where, "bad heads {} / {} (head_dim {}, at most {})", p.num_heads, p.num_kv_heads,
             p.head_dim, cuda::kMaxHeadDim);
    TQ_CHECK(p.v_head_dim == 0 || p.v_head_dim == p.head_dim, where,
             "v_head_dim {} != head_dim {} on a plain cache", p.v_head_dim, p.head_dim);
    const Elem e = ElemOf(kv.dtype, where);
    if (!CheckPlainKv(kv, pos0, n, p.num_kv_heads, p.head_dim, where)) return;
    cuda::DevSinkAttention d;
    d.num_heads = p.num_heads;
    d.num_kv_heads = p.num_kv_heads;
    d.head_dim = p.head_dim;
    d.window = p.window;
    d.scale = p.scale;
    d.softcap = p.softcap;
    d.sinks = p.sinks;
    Enter();
    cuda::LaunchAttentionVariant(q, n, pos0, kv.k, kv.v, e, kv.head_stride, d, out, stream_);
    Launched(where);
  }
  void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                    float* state, const Conv1dParams& p, float* y) override {
    TQ_CHECK(p.channels > 0 && p.kernel >= 1 && p.kernel <= cuda::kMaxConvKernel &&
                 x_stride >= p.channels,
             name_ + " causal conv1d", "channels {}, kernel {} (at most {}), stride {}", p.channels,
             p.kernel, cuda::kMaxConvKernel, x_stride);
    if (n <= 0) return;
    Enter();
    cuda::LaunchCausalConv1d(x, n, x_stride, w, bias, state, p.channels, p.kernel, p.silu, y,
                             stream_);
    Launched("causal conv1d");
  }
  void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                     const float* beta, int64_t n, float* state, const DeltaNetParams& p,
                     float* out) override {
    TQ_CHECK(p.num_k_heads > 0 && p.num_v_heads % p.num_k_heads == 0 && p.k_dim > 0 &&
                 p.v_dim > 0 && p.k_dim <= 4096,
             name_ + " gated deltanet", "bad heads Hk={} Hv={} dk={} dv={}", p.num_k_heads,
             p.num_v_heads, p.k_dim, p.v_dim);
    if (n <= 0) return;
    cuda::DevDeltaNet d;
    d.num_k_heads = p.num_k_heads;
    d.num_v_heads = p.num_v_heads;
    d.k_dim = p.k_dim;
    d.v_dim = p.v_dim;
    d.q_stride = p.q_stride;
    d.k_stride = p.k_stride;
    d.v_stride = p.v_stride;
    d.scale = p.scale;
    d.l2_eps = p.l2_eps;
    d.qk_l2norm = p.qk_l2norm ? 1 : 0;
    Enter();
    cuda::LaunchGatedDeltaNet(q, k, v, g, beta, n, state, d, out, stream_);
    Launched("gated deltanet");
  }
  void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
           const float* D, int64_t n, float* state, const SsdParams& p, float* y) override {
    TQ_CHECK(p.num_heads > 0 && p.n_groups > 0 && p.num_heads % p.n_groups == 0 && p.head_dim > 0 &&
                 p.state_size > 0,
             name_ + " ssd", "bad shape H={} P={} N={} G={}", p.num_heads, p.head_dim, p.state_size,
             p.n_groups);
    if (n <= 0) return;
    cuda::DevSsd d;
    d.num_heads = p.num_heads;
    d.head_dim = p.head_dim;
    d.state_size = p.state_size;
    d.n_groups = p.n_groups;
    d.x_stride = p.x_stride;
    d.bc_stride = p.bc_stride;
    Enter();
    cuda::LaunchSsd(x, B, C, dt, A, D, n, state, d, y, stream_);
    Launched("ssd");
  }

  void BeginStep(int64_t key) override {
    Enter();
    graphs_->Begin(key);
  }
  void EndStep() override {
    Enter();
    graphs_->Finish();
  }

  float* RotationScratch(int64_t count) override {
    Enter();
    return static_cast<float*>(Grow(&rot_scratch_, &rot_scratch_bytes_,
                                    size_t(std::max<int64_t>(count, 1)) * sizeof(float),
                                    "rotation scratch"));
  }

 private:
  // cudaMalloc counted against the limit; throws naming `what` when it does not fit.
  // Device memory for `what` from pool_; out of memory (the card's, or --gpu-memory-limit's) is
  // an error naming `what` and the sizes.
  void* DeviceMalloc(size_t bytes, std::string_view what) {
    std::lock_guard lock(mem_mu_);
    const DevicePool::Result r = pool_.Allocate(bytes);
    if (r.failure == DevicePool::Failure::kLimit)
      Fail(name_,
           "out of device memory under --gpu-memory-limit {:.1f} MiB: {} needs {:.1f} MiB "
           "({} bytes) and {:.1f} MiB are held",
           double(pool_.limit()) / kMiB, what, double(bytes) / kMiB, bytes,
           double(pool_.held()) / kMiB);
    if (r.failure == DevicePool::Failure::kDevice) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      Fail(name_,
           "out of device memory: {} needs {:.1f} MiB ({} bytes; {:.1f} MiB asked of the device), "
           "{:.1f} MiB free of {:.1f} MiB",
           what, double(bytes) / kMiB, bytes, double(r.device_bytes) / kMiB, double(free_b) / kMiB,
           double(total_b) / kMiB);
    }
    return r.p;
  }
  // Returns p to pool_ (no queued work may still read it).
  void Release(void* p) {
    std::lock_guard lock(mem_mu_);
    pool_.Free(p);
  }
  // Frees what a graph capture retired (after a stream sync).
  void FreeRetired() {
    if (graphs_)
      for (void* p : graphs_->TakeRetired()) Release(p);
  }

  static void FreeDevice(void* p, void* ctx) {
    auto* self = static_cast<CudaBackend*>(ctx);
    cudaSetDevice(self->device_);
    if (self->graphs_ && self->graphs_->capturing()) {  // the graph being recorded may use it
      self->graphs_->Retire(p);
      return;
    }
    // Work queued on the stream may still read it.
    cudaStreamSynchronize(self->stream_);
    self->Release(p);
  }

  void Enter() const { Check(cudaSetDevice(device_), "cudaSetDevice"); }

  // cuBLAS, set up when the backend is made (or at the first many-token product when it was made
  // with TURBOQUANT_CUDA_GEMM=exact); false (once said on stderr) when it cannot be (no
  // libcublas, no memory for its workspace): prompts then run on the fp32 kernels.
  bool BlasReady() {
    if (blas_) return true;
    if (blas_failed_) return false;
    const char* error = "unknown error";
    blas_ = cuda::CreateBlas(stream_, &error);
    if (!blas_) {
      blas_failed_ = true;
      fmt::print(stderr, "[{}] cuBLAS is not available ({}): prompts run on the fp32 kernels\n",
                 name_, error);
    }
    return blas_ != nullptr;
  }

  // Packed y = x · Wᵀ (+ bias) through TensorCoreProduct, W dequantized chunk by chunk.
  void PackedTensorCore(const float* x, int64_t n, const DevPacked& d, const float* bias, float* y,
                        bool split, bool convert, const std::string& where) {
    const int64_t chunk = std::max<int64_t>(1, kDequantChunkElems / std::max<int64_t>(d.cols, 1));
    auto* rows = static_cast<uint16_t*>(Grow(&deq_, &deq_bytes_,
                                             size_t(std::min(chunk, d.rows) * d.cols) * 2,
                                             "dequantized weight rows (bf16)"));
    TensorCoreProduct(x, n, d.cols, d.rows, chunk, split, convert, bias, y, where,
                      [&](int64_t r0, int64_t count) {
                        cuda::LaunchDequantBf16(d, r0, count, rows, stream_);
                        Launched(where);
                        return static_cast<const uint16_t*>(rows);
                      });
  }

  // y [n, out] = x [n, in] · Wᵀ (+ bias) on the tensor cores: x to bf16 (hi, and lo when
  // `split`), then for each chunk of at most `chunk` weight rows, rows(r0, count) gives them as
  // bf16 [count, in] (device memory, valid until the next chunk is asked for) and cuBLAS
  // accumulates into y's columns r0 .. r0 + count. With convert false the bf16 scratch already
  // holds this x (hi, and lo when split), written by the previous call.
  template <typename Rows>
  void TensorCoreProduct(const float* x, int64_t n, int64_t in, int64_t out, int64_t chunk,
                         bool split, bool convert, const float* bias, float* y,
                         const std::string& where, Rows&& rows) {
    const size_t xbytes = size_t(n * in) * sizeof(uint16_t);
    auto* hi = static_cast<uint16_t*>(Grow(&xhi_, &xhi_bytes_, xbytes, "bf16 activations"));
    uint16_t* lo = split ? static_cast<uint16_t*>(
                               Grow(&xlo_, &xlo_bytes_, xbytes, "bf16 activations (low parts)"))
                         : nullptr;
    if (convert) cuda::LaunchSplitBf16(x, n * in, hi, lo, stream_);
    if (bias) cuda::LaunchFillRows(bias, n, out, y, stream_);
    Launched(where);
    for (int64_t r0 = 0; r0 < out; r0 += chunk) {
      const int64_t count = std::min(chunk, out - r0);
      const uint16_t* w = rows(r0, count);
      for (const uint16_t* part :
           {static_cast<const uint16_t*>(hi), static_cast<const uint16_t*>(lo)}) {
        if (!part) continue;
        const float beta = bias || part == lo ? 1.0f : 0.0f;
        if (const char* e = cuda::GemmBf16(blas_, part, n, w, count, in, beta, y + r0, out))
          Fail(where, "cuBLAS GEMM [{} x {}] x [{} x {}]: {}", n, in, count, in, e);
      }
    }
  }

  void Check(cudaError_t e, const char* what) const {
    if (e != cudaSuccess) Fail(name_, "{}: {}", what, cudaGetErrorString(e));
  }

  void Launched(std::string_view where) const {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) Fail(name_, "{}: kernel launch failed: {}", where, cudaGetErrorString(e));
  }

  // Waits for the stream, then reads (and clears) the device error word.
  void SyncAndCheck(const char* what) {
    Check(cudaStreamSynchronize(stream_), what);
    FreeRetired();
    cuda::DeviceError e{};
    Check(cudaMemcpy(&e, err_, sizeof(e), cudaMemcpyDeviceToHost), what);
    if (e.code == cuda::kErrNone) return;
    Check(cudaMemset(err_, 0, sizeof(e)), what);
    if (e.code == cuda::kErrTokenId || e.code == cuda::kErrPackedTokenId)
      Fail(name_ + (e.code == cuda::kErrTokenId ? " embed rows" : " packed embed rows"),
           "token id {} is outside the embedding table (its rows were set to 0)", e.value);
    Fail(name_, "device error {} (value {})", e.code, e.value);
  }

  // A buffer that only grows (stable address once reserved).
  void* Grow(void** buf, size_t* have, size_t need, const char* what) {
    if (need <= *have) return *buf;
    if (*buf && graphs_->capturing()) {
      graphs_->Retire(*buf);  // the graph being recorded may use it
      *buf = nullptr;
      *have = 0;
    } else if (*buf) {
      Check(cudaStreamSynchronize(stream_), what);
      Release(*buf);
      *buf = nullptr;
      *have = 0;
    }
    void* p = DeviceMalloc(need, what);
    *buf = p;
    *have = need;
    return p;
  }

  void CheckRotation(const RotationView& r, const std::string& where) const {
    TQ_CHECK(r.signs && r.dim > 0 && r.block > 0 && quant::IsHadamardBlock(r.block) &&
                 r.block <= 4096 && r.dim % r.block == 0,
             where,
             "rotation of dim {} with block {} (a power of two, or 12, 20 or 28 times one, <= 4096 "
             "dividing dim)",
             r.dim, r.block);
  }

  // The kernels' view of a checked rotation: for a block m · 2^k (m > 1) with H_m in device
  // memory (uploaded once).
  cuda::DevRotation DevRot(const RotationView& r) {
    cuda::DevRotation d{r.signs, r.dim, r.block};
    d.m = quant::HadamardBlockFactor(r.block);
    if (d.m > 1) d.small = DeviceBytes(quant::SmallHadamard(d.m));
    return d;
  }

  // CompressedKvView still carries host rotations: their sign vectors are uploaded once and
  // found again by content (dim, block, signs), so a rotation freed and reallocated elsewhere
  // can never alias a stale upload.
  const int8_t* DeviceSigns(const quant::HadamardRotation& r) {
    return DeviceBytes({r.signs().data(), size_t(r.dim())});
  }
  // Sign vectors and small Hadamard matrices in device memory, found again by content.
  const int8_t* DeviceBytes(std::span<const int8_t> bytes) {
    std::lock_guard lock(signs_mu_);
    for (const UploadedSigns& s : signs_)
      if (s.host.size() == bytes.size() &&
          std::memcmp(s.host.data(), bytes.data(), bytes.size()) == 0)
        return s.device;
    UploadedSigns u;
    u.host.assign(bytes.begin(), bytes.end());
    void* p = nullptr;
    Check(cudaMalloc(&p, bytes.size()), "rotation signs");
    Check(cudaMemcpy(p, u.host.data(), bytes.size(), cudaMemcpyHostToDevice), "rotation signs");
    u.device = static_cast<int8_t*>(p);
    signs_.push_back(std::move(u));
    return signs_.back().device;
  }

  struct UploadedSigns {
    std::vector<int8_t> host;
    int8_t* device = nullptr;
  };

  int device_;
  std::string name_, device_name_;
  int cc_major_ = 0, cc_minor_ = 0;
  size_t total_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::StepGraphs> graphs_;  // decode steps as graphs (BeginStep)
  cuda::DeviceError* err_ = nullptr;
  void* rot_scratch_ = nullptr;
  size_t rot_scratch_bytes_ = 0;
  void* copy_scratch_ = nullptr;
  size_t copy_scratch_bytes_ = 0;
  void* attn_scratch_ = nullptr;  // split attention's partial states
  size_t attn_scratch_bytes_ = 0;
  cuda::Blas* blas_ = nullptr;  // BlasReady()
  bool blas_failed_ = false;
  void* xhi_ = nullptr;  // x as bf16 (and its low parts) for the GEMM
  size_t xhi_bytes_ = 0;
  void* xlo_ = nullptr;
  size_t xlo_bytes_ = 0;
  void* deq_ = nullptr;  // a chunk of dequantized packed rows (bf16)
  size_t deq_bytes_ = 0;
  std::mutex signs_mu_;
  std::vector<UploadedSigns> signs_;
  // Device memory held through DeviceMalloc (Allocate's buffers, the scratch above), its peak
  // and the --gpu-memory-limit (0: none).
  // Device memory (DeviceMalloc, Release): slabs and large blocks from cudaMalloc, counted. On
  // the host emulator every buffer is its own allocation, so that ASan keeps each one's bounds.
#if defined(TQ_CUDA_EMU)
  static constexpr size_t kPoolDirectBytes = 1;
#else
  static constexpr size_t kPoolDirectBytes = DevicePool::kDirectBytes;
#endif
  mutable std::mutex mem_mu_;
  DevicePool pool_{[](size_t bytes) -> void* {
                     void* p = nullptr;
                     if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
                     cudaGetLastError();  // clear the allocation error
                     return nullptr;
                   },
                   [](void* p) { cudaFree(p); }, kPoolDirectBytes};
  // CopyAhead's queue (made at the first call) and its events.
  static constexpr int kCopyEvents = 256;
  bool copy_queue_ = false;
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t order_event_ = nullptr;
  cudaEvent_t copy_events_[kCopyEvents] = {};
  uint64_t copy_tickets_ = 0;
};

}  // namespace

std::unique_ptr<Backend> MakeCudaBackend(int device) {
  return std::make_unique<CudaBackend>(device);
}

int CudaDeviceCountImpl() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace tq::kernels
