#include "kernels/backend.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "core/error.h"

#if TQ_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tq::kernels {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kEmbedRows:
      return "embed_rows";
    case Op::kPackedEmbedRows:
      return "packed_embed_rows";
    case Op::kAdd:
      return "add";
    case Op::kRmsNorm:
      return "rms_norm";
    case Op::kRotate:
      return "rotate";
    case Op::kMatMul:
      return "matmul";
    case Op::kMatMulGroup:
      return "matmul_group";
    case Op::kPackedMatMul:
      return "packed_matmul";
    case Op::kRope:
      return "rope";
    case Op::kSiluMul:
      return "silu_mul";
    case Op::kAttention:
      return "attention";
    case Op::kCompressedAttention:
      return "compressed_attention";
    case Op::kKvStore:
      return "kv_store";
    case Op::kKvEncode:
      return "kv_encode";
    case Op::kCenterRows:
      return "center_rows";
    case Op::kGatherColumns:
      return "gather_columns";
    case Op::kMoeRoute:
      return "moe_route";
    case Op::kGatherRows:
      return "gather_rows";
    case Op::kScatterAddRows:
      return "scatter_add_rows";
    case Op::kArgmax:
      return "argmax";
    case Op::kCopy:
      return "copy";
    case Op::kCount:
      break;
  }
  return "?";
}

std::string_view FamilyOpName(FamilyOp op) {
  switch (op) {
    case FamilyOp::kScale:
      return "scale";
    case FamilyOp::kGeluTanhMul:
      return "gelu_tanh_mul";
    case FamilyOp::kClampedSwiglu:
      return "clamped_swiglu";
    case FamilyOp::kSoftcap:
      return "softcap";
    case FamilyOp::kSigmoidGateRows:
      return "sigmoid_gate_rows";
    case FamilyOp::kAttentionVariant:
      return "attention_variant (soft-cap / sinks)";
    case FamilyOp::kCausalConv1d:
      return "causal_conv1d";
    case FamilyOp::kGatedDeltaNet:
      return "gated_deltanet";
    case FamilyOp::kSsd:
      return "ssd (mamba2 scan)";
    case FamilyOp::kDeltaNetGates:
      return "deltanet_gates";
    case FamilyOp::kGatedRmsNorm:
      return "gated_rms_norm";
    case FamilyOp::kPartialRope:
      return "partial_rope";
    case FamilyOp::kSsmDt:
      return "ssm_dt";
    case FamilyOp::kRelu2:
      return "relu2";
    case FamilyOp::kHeadMatMul:
      return "head_matmul";
    case FamilyOp::kCount:
      break;
  }
  return "?";
}

namespace {
[[noreturn]] void Unsupported(const Backend& be, FamilyOp op) {
  Fail(std::string(be.name()),
       "op '{}' is not supported on this backend yet (run with --device cpu)", FamilyOpName(op));
}
}  // namespace

void Backend::PackedMatMulGroup(const float* x, int64_t n,
                                std::span<const PackedMatMulOutput> outs) {
  for (const PackedMatMulOutput& o : outs) PackedMatMul(x, n, *o.w, o.bias, o.y);
}

void Backend::RotatedPackedMatMulGroup(const RotationView& r, const float* x, int64_t n,
                                       std::span<const PackedMatMulOutput> outs) {
  float* xr = RotationScratch(n * r.dim);
  Rotate(r, x, n, xr);
  if (n > 0) PackedMatMulGroup(xr, n, outs);
}

void Backend::SiluMulRotate(const float* gate, const float* up, int64_t rows, const RotationView& r,
                            float* out) {
  SiluMul(gate, up, rows * r.dim, out);
  Rotate(r, out, rows, out);
}

void Backend::KvStorePair(const float* k, const float* v, int64_t n, int64_t heads,
                          int64_t head_dim, void* k_dst, void* v_dst, DType dtype,
                          int64_t head_stride, int64_t slot0) {
  KvStore(k, n, heads, head_dim, k_dst, dtype, head_stride, slot0);
  KvStore(v, n, heads, head_dim, v_dst, dtype, head_stride, slot0);
}

void Backend::AddRmsNorm(float* x, const float* y, int64_t rows, int64_t dim, const float* weight,
                         float eps, float* out) {
  Add(x, y, rows * dim);
  RmsNorm(x, rows, dim, weight, eps, out);
}

void Backend::SetMemoryLimit(int64_t bytes) {
  if (bytes > 0)
    throw UsageError("--gpu-memory-limit",
                     fmt::format("the run is on {}, not a GPU: use --expert-cache (host memory) "
                                 "instead",
                                 name()));
}

DeviceBuffer Backend::AllocatePinnedHost(size_t bytes, std::string_view what) {
  if (bytes == 0) return {};
  void* p = std::malloc(bytes);
  TQ_CHECK(p, std::string(name()), "out of host memory: {} needs {} bytes", what, bytes);
  return DeviceBuffer(
      p, bytes, MemorySpace::kHost, [](void* q, void*) { std::free(q); }, nullptr);
}

uint64_t Backend::CopyAhead(void* dst, const void* src, size_t bytes) {
  CopyToDevice(dst, src, bytes);
  return 0;
}

void Backend::Scale(float*, int64_t, float) { Unsupported(*this, FamilyOp::kScale); }
void Backend::GeluTanhMul(const float*, const float*, int64_t, float*) {
  Unsupported(*this, FamilyOp::kGeluTanhMul);
}
void Backend::ClampedSwiglu(const float*, const float*, int64_t, const ClampedSwigluParams&,
                            float*) {
  Unsupported(*this, FamilyOp::kClampedSwiglu);
}
void Backend::Softcap(float*, int64_t, float) { Unsupported(*this, FamilyOp::kSoftcap); }
void Backend::SigmoidGateRows(float*, const float*, int64_t, int64_t) {
  Unsupported(*this, FamilyOp::kSigmoidGateRows);
}
void Backend::AttentionVariant(const float*, int64_t, int64_t, const KvView&,
                               const SinkAttentionParams&, float*) {
  Unsupported(*this, FamilyOp::kAttentionVariant);
}
void Backend::CausalConv1d(const float*, int64_t, int64_t, const float*, const float*, float*,
                           const Conv1dParams&, float*) {
  Unsupported(*this, FamilyOp::kCausalConv1d);
}
void Backend::GatedDeltaNet(const float*, const float*, const float*, const float*, const float*,
                            int64_t, float*, const DeltaNetParams&, float*) {
  Unsupported(*this, FamilyOp::kGatedDeltaNet);
}
void Backend::Ssd(const float*, const float*, const float*, const float*, const float*,
                  const float*, int64_t, float*, const SsdParams&, float*) {
  Unsupported(*this, FamilyOp::kSsd);
}
void Backend::DeltaNetGates(const float*, const float*, int64_t, int64_t, int64_t, const float*,
                            const float*, float*, float*) {
  Unsupported(*this, FamilyOp::kDeltaNetGates);
}
void Backend::GatedRmsNorm(const float*, int64_t, int64_t, int64_t, const float*, const float*,
                           float, bool, float*) {
  Unsupported(*this, FamilyOp::kGatedRmsNorm);
}
void Backend::SsmDt(const float*, int64_t, int64_t, int64_t, const float*, float, float, float*) {
  Unsupported(*this, FamilyOp::kSsmDt);
}
void Backend::Relu2(const float*, int64_t, float*) { Unsupported(*this, FamilyOp::kRelu2); }
void Backend::PartialRope(float*, int64_t, int64_t, int64_t, int64_t, const int64_t*, const float*,
                          float) {
  Unsupported(*this, FamilyOp::kPartialRope);
}
void Backend::HeadMatMul(const float*, int64_t, const float*, const HeadMatMulParams&, float*) {
  Unsupported(*this, FamilyOp::kHeadMatMul);
}

bool BuiltWithCudaBackend() {
#if TQ_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int CudaDeviceCount() {
#if TQ_WITH_CUDA
  static const int count = CudaDeviceCountImpl();
  return count;
#else
  return 0;
#endif
}

GpuInfo QueryGpu(int device) {
#if TQ_WITH_CUDA
  return QueryCudaGpuImpl(device);
#else
  (void)device;
  Fail("cuda", "this turboquant was built without CUDA (configure with -DTQ_CUDA=ON)");
#endif
}

std::string DefaultDeviceName() {
  const char* env = std::getenv("TURBOQUANT_DEVICE");
  return env && *env ? std::string(env) : std::string("auto");
}

namespace {

std::mutex& RegisteredMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, Backend*, std::less<>>& Registered() {
  static std::map<std::string, Backend*, std::less<>> m;
  return m;
}

}  // namespace

void RegisterBackend(const std::string& name, Backend* backend) {
  TQ_CHECK(backend != nullptr, "device", "'{}': no backend to register", name);
  TQ_CHECK(!name.empty() && name != "auto" && name != "cpu" && name != "ref" &&
               !name.starts_with("cuda"),
           "device", "'{}' is a built-in device name", name);
  std::lock_guard<std::mutex> lock(RegisteredMutex());
  Registered()[name] = backend;
}

Backend& GetBackend(std::string_view device) {
  {
    std::lock_guard<std::mutex> lock(RegisteredMutex());
    const auto it = Registered().find(device);
    if (it != Registered().end()) return *it->second;
  }
  if (device.empty() || device == "auto") {
    if (BuiltWithCudaBackend() && CudaDeviceCount() > 0) return GetBackend("cuda:0");
    return CpuBackend();
  }
  if (device == "cpu") return CpuBackend();
  if (device == "ref") return RefBackend();
  if (device == "cuda" || device.starts_with("cuda:")) {
    int index = 0;
    if (device.size() > 4) {
      const std::string_view num = device.substr(5);
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
      TQ_CHECK(ec == std::errc() && end == num.data() + num.size() && index >= 0, "device",
               "'{}' is not a device (expected cpu, ref, cuda or cuda:N)", device);
    }
    TQ_CHECK(BuiltWithCudaBackend(), "device",
             "'{}': this build has no CUDA backend (configure with the cuda preset, "
             "-DTQ_CUDA=ON)",
             device);
    const int count = CudaDeviceCount();
    TQ_CHECK(count > 0, "device", "'{}': no NVIDIA GPU is visible (CUDA reports 0 devices)",
             device);
    TQ_CHECK(index < count, "device", "'{}': there are {} GPU(s): cuda:0 .. cuda:{}", device, count,
             count - 1);
#if TQ_WITH_CUDA
    static std::mutex mu;
    static std::map<int, std::unique_ptr<Backend>> backends;
    std::lock_guard<std::mutex> lock(mu);
    auto& b = backends[index];
    if (!b) b = MakeCudaBackend(index);
    return *b;
#endif
  }
  Fail("device", "'{}' is not a device (expected cpu, ref, cuda or cuda:N)", device);
}

}  // namespace tq::kernels
