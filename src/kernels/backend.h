// The compute seam (DESIGN.md §9): a Backend is a value the model holds, with memory (allocate,
// upload, download = a sync point), the complete op set the forward pass needs, and
// Supports(op). The forward pass (model/forward.cc) and the KV caches call only these ops.
//
// Every pointer an op takes lives in the backend's memory space (memory_space()): host memory
// for `ref` and `cpu`, device memory for `cuda`. Ops are asynchronous on device backends (they
// run in order on the backend's stream); Download() and Synchronize() are the sync points.
// Kernels see only plain views (TensorView, PackedMatrix, KvView, CompressedKvView,
// RotationView): never model or cache objects.
//
// Backends:
//   ref   the scalar oracle (kernels/ref/): single-threaded, obvious, always built;
//   cpu   SIMD with run-time ISA dispatch and the thread pool (kernels/cpu/); its Upload returns
//         a view of the host pointer, so mmapped weights are used in place (no copy, no cost);
//   cuda  NVIDIA GPUs (kernels/cuda/, -DTQ_CUDA=ON): streams, cuBLAS, graphs. No CUDA header
//         is included outside kernels/cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/device_buffer.h"
#include "core/tensor.h"
#include "kernels/activation_ops.h"
#include "kernels/attention_variant_ops.h"
#include "kernels/head_matmul_ops.h"
#include "kernels/kv_ops.h"
#include "kernels/ops.h"
#include "kernels/packed_ops.h"
#include "kernels/recurrent_ops.h"

namespace tq::kernels {

// The ops of the interface (for Supports and the conformance suite).
enum class Op : uint8_t {
  kEmbedRows,            // dense embedding rows by token id
  kPackedEmbedRows,      // packed (TurboQuant) embedding rows by token id
  kAdd,                  // y += x
  kRmsNorm,              //
  kRotate,               // blockwise randomized Hadamard rotation of rows
  kMatMul,               // dense F32/F16/BF16 weights
  kMatMulGroup,          // several dense matmuls over one input
  kPackedMatMul,         // TurboQuant / affine packed weights
  kRope,                 //
  kSiluMul,              //
  kAttention,            // plain KV cache (F32/F16/BF16), GQA, sliding window
  kCompressedAttention,  // attention on TurboQuant-coded keys and values
  kKvStore,              // fp32 K/V rows -> a plain cache's slots
  kKvEncode,             // rotated K/V rows -> TurboQuant codes, scales (+ QJL sketch)
  kCenterRows,           // the TurboQuant cache's value centering (mean of the first rows)
  kGatherColumns,        // per-row channel permutation (the outlier split's channel order)
  kMoeRoute,             // router logits -> top-k experts and their weights
  kGatherRows,           // dst[i] = src[rows[i]]
  kScatterAddRows,       // dst[rows[i]] += w[i] * src[i]
  kArgmax,               // per row
  kCopy,                 // memmove within the backend's memory
  kCount
};
std::string_view OpName(Op op);

// Ops of the newer families (gemma, phi3, qwen2_moe, gpt_oss, ...), asked for with
// SupportsFamilyOp: a backend that lacks one says no (the default), and Model::Load refuses a
// model that needs it with an error naming the op and the backend.
enum class FamilyOp : uint8_t {
  kScale,             // x *= s
  kGeluTanhMul,       // gelu_tanh(gate) * up
  kClampedSwiglu,     // gpt_oss
  kSoftcap,           // x = cap * tanh(x / cap)
  kSigmoidGateRows,   // x[r, :] *= sigmoid(g[r])
  kAttentionVariant,  // attention on a plain cache with soft-capped scores and/or sinks
  kCausalConv1d,      // depthwise causal conv1d over time with a rolling state (recurrent mixers)
  kGatedDeltaNet,     // Gated DeltaNet recurrence (qwen3_next, qwen3_5)
  kSsd,               // Mamba-2 selective scan (nemotron_h)
  kDeltaNetGates,     // g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b)
  kGatedRmsNorm,      // RMSNorm(x) · w · silu(z), or grouped RMSNorm(x · silu(z)) · w (Mamba-2)
  kSsmDt,             // dt = clamp(softplus(dt + dt_bias), lo, hi) (Mamba-2)
  kRelu2,             // max(x, 0)² (nemotron_h's ungated MLP)
  kPartialRope,       // RoPE on the first rotary_dim of each head (the rest passes through)
  kHeadMatMul,        // y[t, h] = W[h] · x[t, h] per head (MLA's absorbed projections)
  kCount
};
std::string_view FamilyOpName(FamilyOp op);

// One blockwise randomized Hadamard rotation as kernels see it (quant/hadamard.h):
//   R x = blockdiag(H_b, ..., H_b) · diag(s) · x / √b,   s = signs[0..dim) (each ±1).
struct RotationView {
  const int8_t* signs = nullptr;  // [dim], in the backend's memory
  int64_t dim = 0;
  int64_t block = 1;  // dividing dim: a power of two, or 12/20/28 · 2^k (quant/hadamard_blocks.h)
};

// One output of PackedMatMulGroup: y [n, w->rows] = x · wᵀ (+ bias).
struct PackedMatMulOutput {
  const PackedMatrix* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
};

// The routing rule of a mixture-of-experts layer (MoeRoute).
struct MoeRouting {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool renormalize = true;  // divide the chosen probabilities by their sum
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "ref", "cpu", "cuda:0"
  virtual MemorySpace memory_space() const = 0;
  virtual bool Supports(Op op) const = 0;
  // One line for startup messages and doctor ("cpu (AVX-512)", "cuda:0 NVIDIA H200, 139 GiB").
  virtual std::string Describe() const = 0;

  // --- memory ---
  // Uninitialized storage; throws tq::Error naming `what` and the size when it does not fit.
  virtual DeviceBuffer Allocate(size_t bytes, std::string_view what) = 0;
  // Bytes that Allocate's buffers hold now, summed over the process's buffers of this backend
  // (the forward pass's workspace, KV caches, staging; not Upload's views on a host backend, the
  // uploaded weights and the backend's own scratch on a device); -1 where the backend does not
  // count them. What plan's workspace figure is checked against.
  virtual int64_t AllocatedBytes() const { return -1; }
  // Backend memory holding a copy of host bytes, or (host backends) a view of them: the caller
  // keeps `host` alive as long as the result (mmapped weights outlive the model).
  virtual DeviceBuffer Upload(const void* host, size_t bytes, std::string_view what) = 0;
  // Host -> backend memory, in stream order; `src` must stay valid until the next sync.
  virtual void CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Backend -> host; waits for every op queued before it (a sync point).
  virtual void Download(void* dst, const void* src, size_t bytes) = 0;
  // Waits for every queued op.
  virtual void Synchronize() = 0;
  // Bytes of backend memory free and in total (host backends: 0, 0 = not tracked).
  virtual void MemoryInfo(size_t* free_bytes, size_t* total_bytes) const = 0;
  // The most AllocatedBytes() has been since the backend was made (-1: not counted).
  virtual int64_t PeakAllocatedBytes() const { return -1; }
  // Caps what Allocate (weights, caches, workspace, scratch) may hold at once (`--gpu-memory-
  // limit`; 0 = the card's memory): an allocation beyond it fails as out-of-memory, naming the
  // limit. The CUDA context and the cuBLAS library's own workspace are outside it. Device
  // backends only: a host backend throws tq::UsageError.
  virtual void SetMemoryLimit(int64_t bytes);
  virtual int64_t MemoryLimit() const { return 0; }

  // --- copies that overlap compute (device backends; the defaults serve host backends) ---
  // Page-locked host memory, which CopyToDevice and CopyAhead read without staging (host
  // backends: ordinary memory). Throws tq::Error naming `what` when it cannot be had.
  virtual DeviceBuffer AllocatePinnedHost(size_t bytes, std::string_view what);
  // True when CopyAhead runs on a queue of its own, beside the compute stream.
  virtual bool HasCopyQueue() const { return false; }
  // Host -> backend memory on the copy queue, started once every op queued so far has finished
  // (so it never overwrites what a queued kernel still reads) and overlapping the ops queued
  // after it; `src` (pinned, AllocatePinnedHost) must stay valid and unchanged until the copy
  // is waited for. Returns a ticket for WaitCopy (copies finish in ticket order). Default: a
  // CopyToDevice in stream order, ticket 0.
  virtual uint64_t CopyAhead(void* dst, const void* src, size_t bytes);
  // Ops queued after this call wait for copy `ticket` (and every copy before it) on the device;
  // the host does not wait. Ticket 0: nothing to wait for.
  virtual void WaitCopy(uint64_t /*ticket*/) {}

  // --- ops (every pointer in the backend's memory; shapes as in ops.h / packed_ops.h) ---
  // out [n, dim] = table[ids[i]] as fp32; table [vocab, dim] F32/F16/BF16.
  virtual void EmbedRows(const TensorView& table, const int32_t* ids, int64_t n, float* out) = 0;
  // out [n, cols] = rows ids[i] of the dequantized packed matrix (still in its rotated basis).
  virtual void PackedEmbedRows(const PackedMatrix& w, const int32_t* ids, int64_t n,
                               float* out) = 0;
  // y[i] += x[i], i < n.
  virtual void Add(float* y, const float* x, int64_t n) = 0;
  virtual void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                       float* out) = 0;
  // The residual add and the next norm: x [rows, dim] += y, then out = RmsNorm(x) (out must not
  // alias x or y). The default is Add then RmsNorm (the host backends' results are theirs); the
  // cuda backend does both in one pass over the row.
  virtual void AddRmsNorm(float* x, const float* y, int64_t rows, int64_t dim, const float* weight,
                          float eps, float* out);
  // out [rows, dim] = R x for each row of x [rows, dim]; out may alias x.
  virtual void Rotate(const RotationView& r, const float* x, int64_t rows, float* out) = 0;
  virtual void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias,
                      float* y) = 0;
  virtual void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) = 0;
  // x already rotated (the caller rotates once per sharing group).
  virtual void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                            float* y) = 0;
  // Several packed matmuls over one rotated input (q/k/v, gate/up: a rotation group). The
  // default runs PackedMatMul for each in order; the cuda backend fuses them into one launch.
  virtual void PackedMatMulGroup(const float* x, int64_t n,
                                 std::span<const PackedMatMulOutput> outs);
  // The same products over R x, x [n, r.dim] not yet rotated (x is left as it is). The default
  // rotates into RotationScratch, then PackedMatMulGroup; the cuda backend rotates inside its
  // one-token tensor-core kernel (one launch instead of two).
  virtual void RotatedPackedMatMulGroup(const RotationView& r, const float* x, int64_t n,
                                        std::span<const PackedMatMulOutput> outs);
  virtual void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim,
                    const int64_t* positions, const float* inv_freq, float attn_factor) = 0;
  virtual void SiluMul(const float* gate, const float* up, int64_t n, float* out) = 0;
  // out [rows, r.dim] = R (silu(gate) ⊙ up) row by row: the SwiGLU product already rotated for a
  // packed linear that multiplies R x (its MatMulRotated). out may alias gate or up. The default
  // is SiluMul then Rotate (the same results); the cuda backend does both in one pass.
  virtual void SiluMulRotate(const float* gate, const float* up, int64_t rows,
                             const RotationView& r, float* out);
  virtual void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                         const AttentionParams& p, float* out) = 0;
  virtual void CompressedAttention(const float* q, int64_t n, int64_t pos0,
                                   const CompressedKvView& kv, const AttentionParams& p,
                                   float* out) = 0;
  // Stores src [n, heads, head_dim] (fp32) into a plain cache laid out [heads, slots, head_dim]
  // of `dtype` (F32/F16/BF16): element (h, slot0 + i, d) of dst, head_stride = slots * head_dim.
  virtual void KvStore(const float* src, int64_t n, int64_t heads, int64_t head_dim, void* dst,
                       DType dtype, int64_t head_stride, int64_t slot0) = 0;
  // A layer's keys and values at once: KvStore(k, .., k_dst, ..) and KvStore(v, .., v_dst, ..)
  // with the same shape, dtype, stride and slots (the default makes those two calls; the cuda
  // backend stores both in one launch).
  virtual void KvStorePair(const float* k, const float* v, int64_t n, int64_t heads,
                           int64_t head_dim, void* k_dst, void* v_dst, DType dtype,
                           int64_t head_stride, int64_t slot0);
  // The TurboQuant cache's encode (kv_ops.h): n positions × heads vectors of p.format.dim
  // channels, vector (i, h) read from src + i * pos_stride + h * head_stride (elements of
  // src_dtype: F32 or F16), coded as EncodeKvVector does (bit-exact on the host backends; a
  // device may sum in another order: the same codes but for near-ties) into slot
  // h * dst.head_stride + slot0 + i of dst; with p.qjl_matrix also the sketch of each vector's
  // residual x - decode(codes) (EncodeQjlResidual).
  virtual void KvEncode(const KvEncodeParams& p, const void* src, DType src_dtype, int64_t n,
                        int64_t heads, int64_t pos_stride, int64_t head_stride,
                        const KvCodeSlots& dst, int64_t slot0) = 0;
  // An append's keys and values: KvEncode(kp, ksrc, .., kdst, ..) then KvEncode(vp, vsrc, ..,
  // vdst, ..) with the same positions and strides; a device does both in one launch.
  virtual void KvEncodePair(const KvEncodeParams& kp, const void* ksrc, const KvCodeSlots& kdst,
                            const KvEncodeParams& vp, const void* vsrc, const KvCodeSlots& vdst,
                            DType src_dtype, int64_t n, int64_t heads, int64_t pos_stride,
                            int64_t head_stride, int64_t slot0) {
    KvEncode(kp, ksrc, src_dtype, n, heads, pos_stride, head_stride, kdst, slot0);
    KvEncode(vp, vsrc, src_dtype, n, heads, pos_stride, head_stride, vdst, slot0);
  }
  // x [rows, width]: when mean_rows > 0, first mean [width] = the mean of rows 0 .. mean_rows-1
  // (summed in row order in fp32, then divided by mean_rows); then x[r, j] -= mean[j] for every
  // row (mean_rows = 0: subtracts the mean as it is).
  virtual void CenterRows(float* x, int64_t rows, int64_t width, float* mean,
                          int64_t mean_rows) = 0;
  // out[r, j] = x[r, order[(r % period) * dim + j]] for x, out [rows, dim] (not aliased), order
  // [period, dim].
  virtual void GatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                             int64_t period, float* out) = 0;
  // logits [n, num_experts] -> chosen [n, top_k] (descending probability, ties: lower id) and
  // weight [n, top_k]: softmax over all experts in fp32, then top-k (renormalized when asked).
  virtual void MoeRoute(const float* logits, int64_t n, const MoeRouting& r, int32_t* chosen,
                        float* weight) = 0;
  // dst [count, dim] = src[rows[i]].
  virtual void GatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim,
                          float* dst) = 0;
  // dst[rows[i]] += weight[i] * src[i] for i < count, in order of i (rows may repeat).
  virtual void ScatterAddRows(const float* src, const int32_t* rows, const float* weight,
                              int64_t count, int64_t dim, float* dst) = 0;
  // out[r] = index of the largest element of x[r, 0..n) (the first on ties).
  virtual void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) = 0;
  // memmove within backend memory.
  virtual void Copy(void* dst, const void* src, size_t bytes) = 0;

  // --- family ops (SupportsFamilyOp; the defaults throw "[<backend>] op X is not supported") ---
  virtual bool SupportsFamilyOp(FamilyOp) const { return false; }
  // x[i] *= s, i < n.
  virtual void Scale(float* x, int64_t n, float s);
  // out[i] = gelu_tanh(gate[i]) * up[i] (out may alias gate).
  virtual void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
  // GPT-OSS's clamped SwiGLU (activation_ops.h), out may alias gate.
  virtual void ClampedSwiglu(const float* gate, const float* up, int64_t n,
                             const ClampedSwigluParams& p, float* out);
  // x[i] = cap * tanh(x[i] / cap) in place.
  virtual void Softcap(float* x, int64_t n, float cap);
  // x [rows, dim]: row r scaled by sigmoid(g[r]) (qwen2_moe's shared-expert gate).
  virtual void SigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim);
  // Attention as Attention() with p.softcap (scores -> softcap · tanh(s / softcap) after
  // scaling) and p.sinks (a per-head logit in the softmax denominator); reads p.num_heads,
  // num_kv_heads, head_dim (= v_head_dim), scale, window from p; kv as for Attention().
  virtual void AttentionVariant(const float* q, int64_t n, int64_t pos0, const KvView& kv,
                                const SinkAttentionParams& p, float* out);

  // The recurrent mixers (recurrent_ops.h has the contracts; state lives with the sequence, in
  // the backend's memory, updated in place).
  virtual void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w,
                            const float* bias, float* state, const Conv1dParams& p, float* y);
  virtual void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                             const float* beta, int64_t n, float* state, const DeltaNetParams& p,
                             float* out);
  virtual void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
                   const float* D, int64_t n, float* state, const SsdParams& p, float* y);
  // Gated DeltaNet's per-token gates from its projections b, a [n, heads] (rows `stride` floats
  // apart): g[t, h] = -exp(a_log[h]) · softplus(a[t, h] + dt_bias[h]) (log decay),
  // beta[t, h] = sigmoid(b[t, h]); g, beta [n, heads] dense.
  virtual void DeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n,
                             int64_t heads, const float* a_log, const float* dt_bias, float* g,
                             float* beta);
  // x, z, out [rows, dim] (out may alias x), weight [dim], RMS over groups of `group` floats
  // (group divides dim):
  //   gate_first = false (Gated DeltaNet): out = x / rms(x) · weight · silu(z)
  //   gate_first = true  (Mamba-2):        u = x · silu(z);  out = u / rms(u) · weight
  virtual void GatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group,
                            const float* z, const float* weight, float eps, bool gate_first,
                            float* out);
  // Mamba-2's step sizes: out[t, h] = clamp(softplus(dt[t, h] + bias[h]), lo, hi); dt rows
  // `stride` floats apart, out [n, heads] dense.
  virtual void SsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads, const float* bias,
                     float lo, float hi, float* out);
  // out[i] = max(x[i], 0)², i < n (out may alias x).
  virtual void Relu2(const float* x, int64_t n, float* out);
  // Rope() on the first rotary_dim of each head of x [rows, heads, head_dim] (pairs (i, i +
  // rotary_dim/2), inv_freq [rotary_dim / 2]); dims rotary_dim .. head_dim-1 are unchanged.
  virtual void PartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim,
                           int64_t rotary_dim, const int64_t* positions, const float* inv_freq,
                           float attn_factor);
  // y [n, heads, out] = W[h] · x[t, h] for every token t and head h, W [heads, out, in] fp32,
  // rows of x and y p.x_stride / p.y_stride floats apart (head_matmul_ops.h): multi-head latent
  // attention's query and output absorbed into the latent space (model/mla_absorb.h).
  virtual void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p,
                          float* y);

  // --- step graphs (cuda: kernels/cuda/cuda_step_graph.h; the defaults do nothing) ---
  // The ops from BeginStep to the step's first sync point (Download, Synchronize, Upload) or
  // EndStep run as one recorded graph: the caller (Model::Run, for decode steps) passes a key
  // naming the step's shape, so that each shape keeps its own graph. Host pointers given to
  // CopyToDevice inside a step may be reused as soon as it returns, as always.
  virtual void BeginStep(int64_t /*key*/) {}
  virtual void EndStep() {}

  // Scratch floats for a packed group's rotated input, valid until the next call (grown on
  // demand, reserved once in practice so device addresses stay stable).
  virtual float* RotationScratch(int64_t count) = 0;
};

// The scalar oracle and the SIMD backend (process-wide objects; host memory).
Backend& RefBackend();
Backend& CpuBackend();

// True when this build has the CUDA backend (-DTQ_CUDA=ON); whether a GPU is present is
// CudaDeviceCount() > 0.
bool BuiltWithCudaBackend();
int CudaDeviceCount();

// A GPU as the CUDA runtime reports it (doctor, plan).
struct GpuInfo {
  int device = 0;
  std::string name;
  int64_t free_bytes = 0, total_bytes = 0;
  int driver_version = 0, runtime_version = 0;  // e.g. 13000 = 13.0
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
};
// Throws tq::Error "[cuda] ..." when the build has no CUDA or the device is not usable (the CUDA
// runtime's message).
GpuInfo QueryGpu(int device = 0);

// The backend named by `device`: "ref", "cpu", "cuda" (= "cuda:0") or "cuda:N"; "" or "auto"
// picks cuda:0 when the build has CUDA and a GPU is present, else cpu. Throws tq::Error naming
// the device when it cannot be had (a CPU-only build, no GPU, N out of range). Device backends
// are created once per device and live until exit.
Backend& GetBackend(std::string_view device);
// Adds a named backend that GetBackend (and so Model::Load's device) returns for `name`: tests
// register the CUDA sources on the host emulator as "emu" to run whole models through them. The
// backend must outlive every use; a built-in name (ref, cpu, auto, cuda...) is refused.
void RegisterBackend(const std::string& name, Backend* backend);
// The default device name: $TURBOQUANT_DEVICE, else "auto".
std::string DefaultDeviceName();

}  // namespace tq::kernels
