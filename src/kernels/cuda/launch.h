// The CUDA kernels' launchers (kernels/cuda/*.cu), called by CudaBackend (cuda_backend.cc).
// Everything here is plain data: the views are PODs mirroring kernels/ views (packed_ops.h,
// kv_ops.h, backend.h) with every pointer in device memory, so that the .cu files need no
// project header (and nvcc never sees fmt or the quant/ classes). Every launcher enqueues on
// `stream` and returns at once; errors surface through cudaGetLastError (launch) or the
// backend's device error word (bad ids, checked at the next sync).
#pragma once

#if !defined(TQ_CUDA_EMU)
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "kernels/cuda/code_at.h"

// kernel<<<grid, block, 0, stream>>>(args...), or the host emulator's launch in the unit tests
// (tests/cuda_emu/emu.h defines TQ_EMU_LAUNCH).
// TQ_LAUNCH_SMEM: the same with `smem` bytes of dynamic shared memory (DynamicShared() in
// common.cuh; above 48 KiB the kernel must have raised its limit with cudaFuncSetAttribute).
// TQ_LAUNCH_PDL: TQ_LAUNCH_SMEM as a programmatic dependent launch (sm_90): the kernel's blocks
// may start while the stream's previous kernel still runs (once that kernel's blocks have all
// called GridLaunchDependents or exited), so its set-up overlaps the other's tail; the kernel
// must call GridDependencyWait (common.cuh) before it reads anything an earlier kernel writes
// or writes anything an earlier kernel reads. The emulator runs kernels one after another.
#if defined(TQ_CUDA_EMU)
#define TQ_LAUNCH(kernel, grid, block, stream, ...) TQ_EMU_LAUNCH(kernel, grid, block, __VA_ARGS__)
#define TQ_LAUNCH_SMEM(kernel, grid, block, smem, stream, ...) \
  TQ_EMU_LAUNCH_SMEM(kernel, grid, block, smem, __VA_ARGS__)
#define TQ_LAUNCH_PDL(kernel, grid, block, smem, stream, ...) \
  TQ_EMU_LAUNCH_SMEM(kernel, grid, block, smem, __VA_ARGS__)
#else
#define TQ_LAUNCH(kernel, grid, block, stream, ...) kernel<<<grid, block, 0, stream>>>(__VA_ARGS__)
#define TQ_LAUNCH_SMEM(kernel, grid, block, smem, stream, ...) \
  kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define TQ_LAUNCH_PDL(kernel, tq_grid, tq_block, tq_smem, tq_stream, ...)            \
  do {                                                                               \
    cudaLaunchAttribute tq_pdl[1];                                                   \
    tq_pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;               \
    tq_pdl[0].val.programmaticStreamSerializationAllowed = 1;                        \
    cudaLaunchConfig_t tq_cfg = {};                                                  \
    tq_cfg.gridDim = dim3(tq_grid);                                                  \
    tq_cfg.blockDim = dim3(tq_block);                                                \
    tq_cfg.dynamicSmemBytes = (tq_smem);                                             \
    tq_cfg.stream = (tq_stream);                                                     \
    tq_cfg.attrs = tq_pdl;                                                           \
    tq_cfg.numAttrs = 1;                                                             \
    cudaLaunchKernelEx(&tq_cfg, kernel, __VA_ARGS__); /* errors: cudaGetLastError */ \
  } while (0)
#endif

namespace tq::kernels::cuda {

// Weight / cache element types (core/dtype.h's F32/F16/BF16, renumbered for the kernels).
enum class Elem : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Code formats: kQ1 .. kTernary of code_at.h (quant::CodeFormat's numbering).

// The device error word: the first failing kernel writes {code, value}; the backend reads it at
// each sync point and throws (EmbedRows with a token id outside the table, ...).
enum : int { kErrNone = 0, kErrTokenId = 1, kErrPackedTokenId = 2 };
struct DeviceError {
  int code;
  int value;
};

// kernels::PackedMatrix with device pointers.
struct DevPacked {
  int affine = 0;  // 0 = codebook (scale * codebook[code]), 1 = affine (min + scale * code)
  int format = kQ4;
  int64_t rows = 0, cols = 0, group_size = 0, row_bytes = 0;
  const uint8_t* codes = nullptr;
  const uint16_t* scales = nullptr;      // fp16 [rows, cols / group_size], or
  const uint8_t* scale_codes = nullptr;  // e8 codes into scale_table [256]
  const float* scale_table = nullptr;
  const uint16_t* mins = nullptr;   // fp16, affine only
  const float* codebook = nullptr;  // [levels], codebook only
  int levels = 0;
  float linear_q8_step = 0.0f;  // PackedMatrix::linear_q8_step
};

// A dense weight [out, in] of elem type.
struct DevDense {
  const void* data = nullptr;
  Elem elem = Elem::kF32;
  int64_t out = 0, in = 0;
};

// A blockwise randomized Hadamard rotation (backend.h RotationView).
struct DevRotation {
  const int8_t* signs = nullptr;  // [dim], ±1
  int64_t dim = 0, block = 1;
  // Blocks m · 2^k (m = 12, 20, 28: turboquant-mlx imports): H_m row-major [m, m], ±1, device.
  const int8_t* small = nullptr;
  int64_t m = 1;
};

// kernels::KvCodeSegment / KvCodeFormat.
struct DevSegment {
  int64_t begin = 0, end = 0, byte_offset = 0;
  int format = kQ4;
  int levels = 0;                     // entries of `table`
  const float* table = nullptr;       // [levels], device
  const float* thresholds = nullptr;  // [levels - 1], device (KvEncode only)
};
struct DevCodeFormat {
  int64_t dim = 0, group = 0, code_bytes = 0;
  int num_segments = 0;
  DevSegment seg[2];
};
struct DevSpan {
  int64_t begin = 0, end = 0, head_stride = 0;
  int coded = 0;
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  const uint8_t* k_codes = nullptr;
  const uint8_t* v_codes = nullptr;
  const uint16_t* k_scales = nullptr;
  const uint16_t* v_scales = nullptr;
  const uint8_t* k_qjl = nullptr;
  const uint16_t* k_qjl_norm = nullptr;
};
struct DevCompressedKv {
  DevRotation k_rot, v_rot;
  DevCodeFormat kf, vf;
  DevSpan spans[3];
  int num_spans = 0;
  const float* v_offset = nullptr;    // [kv_heads, dim] or null
  const float* qjl_matrix = nullptr;  // [m, dim] or null
  int64_t qjl_m = 0;
  float qjl_factor = 0.0f;           // √(π/2) / m
  const int32_t* k_order = nullptr;  // [kv_heads, dim] or null
  const int32_t* v_order = nullptr;
};

// kernels::KvEncodeParams / KvCodeSlots (Backend::KvEncode).
struct DevKvEncode {
  DevCodeFormat f;
  int scale = 1;                      // kernels::KvScale: 0 norm, 1 mse, 2 unbiased
  const float* qjl_matrix = nullptr;  // [qjl_m, dim] or null
  int64_t qjl_m = 0;
};
struct DevCodeSlots {
  uint8_t* codes = nullptr;
  uint16_t* scales = nullptr;
  uint8_t* qjl_bits = nullptr;
  uint16_t* qjl_norm = nullptr;
  int64_t head_stride = 0;
};
// One side (keys or values) of an encode: what, from where, to where.
struct DevKvEncodeJob {
  DevKvEncode p;
  const void* src = nullptr;
  DevCodeSlots dst;
};

struct DevAttention {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, window = 0;
  float scale = 1.0f;
};

// --- elementwise.cu ---
void LaunchEmbedRows(const void* table, Elem elem, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t n, float* out, DeviceError* err, cudaStream_t s);
void LaunchPackedEmbedRows(const DevPacked& w, const int32_t* ids, int64_t n, float* out,
                           DeviceError* err, cudaStream_t s);
void LaunchAdd(float* y, const float* x, int64_t n, cudaStream_t s);
void LaunchSiluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s);
void LaunchRmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                   float* out, cudaStream_t s);
// x += y, then out = RmsNorm(x) (one pass over each row where the vector kernel fits).
void LaunchAddRmsNorm(float* x, const float* y, int64_t rows, int64_t dim, const float* weight,
                      float eps, float* out, cudaStream_t s);
void LaunchRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                const float* inv_freq, float attn_factor, cudaStream_t s);
// src into dst, and src2 into dst2 in the same launch when src2 is not null (Backend::KvStore /
// KvStorePair).
void LaunchKvStore(const float* src, const float* src2, int64_t n, int64_t heads, int64_t head_dim,
                   void* dst, void* dst2, Elem elem, int64_t head_stride, int64_t slot0,
                   cudaStream_t s);
void LaunchMoeRoute(const float* logits, int64_t n, int64_t experts, int64_t top_k,
                    bool renormalize, int32_t* chosen, float* weight, cudaStream_t s);
void LaunchGatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim, float* dst,
                      cudaStream_t s);
void LaunchScatterAddRows(const float* src, const int32_t* rows, const float* weight, int64_t count,
                          int64_t dim, float* dst, cudaStream_t s);
void LaunchArgmax(const float* x, int64_t rows, int64_t n, int32_t* out, cudaStream_t s);

// --- kv_encode.cu --- the TurboQuant cache's append ops (Backend::KvEncode, CenterRows,
// GatherColumns). KvEncode: one warp per vector (dim <= 1024), src F32 or F16 (src_f16).
void LaunchKvEncode(const DevKvEncode& p, const void* src, bool src_f16, int64_t n, int64_t heads,
                    int64_t pos_stride, int64_t head_stride, const DevCodeSlots& dst, int64_t slot0,
                    cudaStream_t s);
// Keys and values of one append in one launch (grid.y = 2), the same positions and strides.
void LaunchKvEncodePair(const DevKvEncodeJob& k, const DevKvEncodeJob& v, bool src_f16, int64_t n,
                        int64_t heads, int64_t pos_stride, int64_t head_stride, int64_t slot0,
                        cudaStream_t s);
void LaunchCenterRows(float* x, int64_t rows, int64_t width, float* mean, int64_t mean_rows,
                      cudaStream_t s);
void LaunchGatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                         int64_t period, float* out, cudaStream_t s);

// --- rotate.cu --- out [rows, dim] = R x (out may alias x); segment = a multiple of the block
// (<= 4096) dividing dim: one CUDA block per (row, segment).
// up not null: the rows of silu(x) ⊙ up are rotated (Backend::SiluMulRotate).
void LaunchRotate(const DevRotation& r, const float* x, int64_t rows, float* out, cudaStream_t s,
                  const float* up = nullptr);

// --- matmul.cu --- y [n, out] = x [n, in] · Wᵀ (+ bias): a warp-per-row matvec for n <= 8
// and a 64x64-tiled fp32 GEMM above (weights decoded into shared memory tile by tile).
void LaunchDenseMatMul(const float* x, int64_t n, const DevDense& w, const float* bias, float* y,
                       cudaStream_t s);
void LaunchPackedMatMul(const float* x, int64_t n, const DevPacked& w, const float* bias, float* y,
                        cudaStream_t s);

// --- matvec.cu --- the same products for n <= 8 tokens with 16-byte loads, kRows rows per
// warp: false (nothing launched) when the weight's layout or alignment does not allow it.
bool FastPackedMatVec(const float* x, int64_t n, const DevPacked& w, const float* bias, float* y,
                      cudaStream_t s);
// Several packed products over one input x (the q/k/v or gate/up of a layer) in one launch:
// ys[i] [n, ws[i].rows] = x · ws[i]ᵀ (+ biases[i]), count <= 4; false (nothing launched) unless
// every member is eligible as above and all share format, method, cols and group size.
bool FastPackedMatVecGroup(const float* x, int64_t n, const DevPacked* ws,
                           const float* const* biases, float* const* ys, int count, cudaStream_t s);
// --- matvec_tiles.cu --- the 1-token packed product by column tiles (x in registers, a ring of
// rows in flight per warp), alone or as a group as above; false (nothing launched) when the
// layout does not allow it or TURBOQUANT_CUDA_MATVEC=rows asks for matvec.cu's row kernel.
bool TiledPackedMatVec(const float* x, const DevPacked& w, const float* bias, float* y,
                       cudaStream_t s);
bool TiledPackedMatVecGroup(const float* x, const DevPacked* ws, const float* const* biases,
                            float* const* ys, int count, cudaStream_t s);
bool FastDenseMatVec(const float* x, int64_t n, const DevDense& w, const float* bias, float* y,
                     cudaStream_t s);
// --- matvec_mma.cu --- the 1-token q4 / q2 codebook product on the tensor cores (bf16 pairs of
// codebook levels, x as bf16 hi + lo, fp32 accumulation), one matrix or a group as above (count
// <= 4, same format, scale format, cols and group size; cols a multiple of 128, power-of-two
// groups of at least 32); false (nothing launched) when the layout does not allow it or
// TURBOQUANT_CUDA_MATVEC / TURBOQUANT_CUDA_GEMM=exact asks for another kernel.
// With `rot` (not null), the products are over R x: the kernel rotates x itself (power-of-two
// blocks dividing cols, cols <= 16384: matvec_mma.cu kMaxFusedRotationCols) — false (nothing
// launched) when it cannot. Launched as a programmatic dependent (TQ_LAUNCH_PDL) on sm_90 unless
// TURBOQUANT_CUDA_PDL=0: its set-up overlaps the previous kernel's tail.
bool MmaPackedMatVec(const float* x, const DevPacked* ws, const float* const* biases,
                     float* const* ys, int count, const DevRotation* rot, cudaStream_t s);
// Which 1-token packed kernel TURBOQUANT_CUDA_MATVEC asks for: mma (the default where eligible,
// else rows), rows (matvec.cu's fp32 row kernel; also under TURBOQUANT_CUDA_GEMM=exact), tiles or
// async (matvec_tiles.cu). Read at each launch (a getenv beside a launch) so a test can switch.
enum class MatVecKind { kMma, kRows, kTiles, kAsync };
MatVecKind MatVecKindFromEnv();

// --- gemm_bf16.cu --- the bf16 operands of the tensor-core GEMM (blas.cc).
// hi[i] = bf16(x[i]) and, when lo is not null, lo[i] = bf16(x[i] - hi[i]) (fp32-grade x as two
// bf16 GEMMs).
void LaunchSplitBf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t s);
// out [count, w.cols] (bf16, 16-byte aligned) = rows r0 .. r0 + count of w, dequantized.
void LaunchDequantBf16(const DevPacked& w, int64_t r0, int64_t count, uint16_t* out,
                       cudaStream_t s);
// y [n, out] = bias in every row.
void LaunchFillRows(const float* bias, int64_t n, int64_t out, float* y, cudaStream_t s);

// --- blas.cc --- cuBLAS on the backend's stream (the emulator: a host loop, same rounding).
struct Blas;
// A cuBLAS handle bound to `s`, with its own workspace; null with *error set when it fails.
Blas* CreateBlas(cudaStream_t s, const char** error);
void DestroyBlas(Blas* b);
// y [n, rows] (row stride ldy) = beta · y + x [n, in] · w [rows, in]ᵀ, x and w bf16 (row-major),
// fp32 accumulation and output. Null on success, else cuBLAS's status string.
const char* GemmBf16(Blas* b, const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows,
                     int64_t in, float beta, float* y, int64_t ldy);

// --- attention.cu --- head_dim 64/128/256 with at most 8 query heads per KV head: one CUDA
// block (4 warps) per (query row, KV head, split of the positions; the cp.async-pipelined kernel
// of attention_piped.cu unless TURBOQUANT_CUDA_KV_SPLIT=warp), then a log-sum-exp merge of the
// splits through `scratch` (AttentionScratchFloats(n, pos0, elem, p) floats, device memory; none
// needed when that is 0); other shapes: one block per (query row, head). Online softmax.
int64_t AttentionScratchFloats(int64_t n, int64_t pos0, Elem elem, const DevAttention& p);
void LaunchAttention(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                     Elem elem, int64_t head_stride, const DevAttention& p, float* scratch,
                     float* out, cudaStream_t s);
// --- attention_prefill.cu --- n >= kPrefillMinRows query rows of head_dim 64 or 128 by tiles
// of 64 rows x 64 positions (fp32); false (nothing launched) for other shapes.
inline constexpr int64_t kPrefillMinRows = 16;
bool PrefillAttention(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                      Elem elem, int64_t head_stride, const DevAttention& p, float* out,
                      cudaStream_t s);
// --- attention_compressed.cu --- the TurboQuant cache: head_dim 64/128/256, at most 8 query
// heads per KV head and QJL sketches of at most 1024 rows by the split kernels (query rotation,
// one block per (row, KV head, split), log-sum-exp merge + un-rotation) through `scratch`
// (CompressedAttentionScratchFloats floats, device memory); other shapes (or no scratch) one
// block per (query row, head).
int64_t CompressedAttentionScratchFloats(int64_t n, int64_t pos0, const DevCompressedKv& kv,
                                         const DevAttention& p);
void LaunchCompressedAttention(const float* q, int64_t n, int64_t pos0, const DevCompressedKv& kv,
                               const DevAttention& p, float* scratch, float* out, cudaStream_t s);

// --- family_ops.cu --- the ops of the newer families (backend.h FamilyOp; contracts in
// activation_ops.h, attention_variant_ops.h, recurrent_ops.h), each with its launch shape there.
void LaunchScale(float* x, int64_t n, float s, cudaStream_t st);
void LaunchGeluTanhMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s);
void LaunchClampedSwiglu(const float* gate, const float* up, int64_t n, float alpha, float limit,
                         float* out, cudaStream_t s);
void LaunchSoftcap(float* x, int64_t n, float cap, cudaStream_t s);
void LaunchSigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim, cudaStream_t s);
void LaunchRelu2(const float* x, int64_t n, float* out, cudaStream_t s);
// MLA's per-head product (kernels/head_matmul_ops.h HeadMatMul): y[t, h] = W[h] · x[t, h],
// W [heads, out, in] fp32, rows (t, h) of x and y x_stride / y_stride floats apart.
struct DevHeadMatMul {
  int64_t heads = 0, in = 0, out = 0, x_stride = 0, y_stride = 0;
};
void LaunchHeadMatMul(const float* x, int64_t n, const float* w, const DevHeadMatMul& p, float* y,
                      cudaStream_t s);
void LaunchSsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads, const float* bias,
                 float lo, float hi, float* out, cudaStream_t s);
void LaunchDeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n, int64_t heads,
                         const float* a_log, const float* dt_bias, float* g, float* beta,
                         cudaStream_t s);
void LaunchGatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group, const float* z,
                        const float* weight, float eps, bool gate_first, float* out,
                        cudaStream_t s);
void LaunchPartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                       const int64_t* positions, const float* inv_freq, float attn_factor,
                       cudaStream_t s);
// Attention on a plain cache with soft-capped scores and/or per-head sink logits (head_dim <=
// kMaxHeadDim, v_head_dim = head_dim).
struct DevSinkAttention {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, window = 0;
  float scale = 1.0f, softcap = 0.0f;
  const float* sinks = nullptr;  // [num_heads] or null, device
};
void LaunchAttentionVariant(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                            Elem elem, int64_t head_stride, const DevSinkAttention& p, float* out,
                            cudaStream_t s);
// The recurrent mixers' ops (state fp32 in device memory, updated in place).
inline constexpr int64_t kMaxConvKernel = 8;
void LaunchCausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w,
                        const float* bias, float* state, int64_t channels, int64_t kernel,
                        bool silu, float* y, cudaStream_t s);
struct DevDeltaNet {
  int64_t num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  float scale = 1.0f, l2_eps = 1e-6f;
  int qk_l2norm = 1;
};
void LaunchGatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                         const float* beta, int64_t n, float* state, const DevDeltaNet& p,
                         float* out, cudaStream_t s);
struct DevSsd {
  int64_t num_heads = 0, head_dim = 0, state_size = 0, n_groups = 1;
  int64_t x_stride = 0, bc_stride = 0;
};
void LaunchSsd(const float* x, const float* B, const float* C, const float* dt, const float* A,
               const float* D, int64_t n, float* state, const DevSsd& p, float* y, cudaStream_t s);

// The largest head_dim the attention kernels take.
// 576: MLA's latent cache (DeepSeek's kv_lora 512 + rope 64, one KV head for all query heads),
// which takes the generic kernel (the split ones are instanced for 64 / 128 / 256).
inline constexpr int64_t kMaxHeadDim = 576;

}  // namespace tq::kernels::cuda
