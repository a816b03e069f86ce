// Attention on a TurboQuant-compressed KV cache (DESIGN.md §3), without decompressing it.
//
// Every key and value of a compressed layer lives in the rotated domain: k' = R_k k, v' = R_v v
// (R = the layer's randomized Hadamard rotation, orthogonal). A position is either an fp16 vector
// (sink and recent-window tokens, stored already rotated) or a coded vector: channel i of k' is
// scale[g(i)] * levels[code_i], with g(i) = i / group. Since R is orthogonal,
//   q · k = (R_k q) · k'        and        Σ_t p_t v_t = R_vᵀ (Σ_t p_t v'_t),
// so the query is rotated once per head, scores are taken against codebook values and values are
// accumulated in the rotated domain and un-rotated once per head.
//
// QJL residual sketch (optional, keys only; the paper's TurboQuant_prod): a coded key k̂' leaves
// the residual r = k' - k̂' (rotated domain). The cache stores m sign bits sign(S r) (S the
// layer's i.i.d. N(0, 1) matrix [m, dim]) and ‖r‖ (fp16), and the score becomes the unbiased
//   q'·k' ≈ q'·k̂' + ‖r‖ √(π/2) / m · ⟨S q', sign(S r)⟩,
// E_S[⟨S q', sign(S r)⟩] = m √(2/π) q'·r/‖r‖ (Gaussian rows); S q' is computed once per query row.
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "quant/format.h"
#include "quant/hadamard.h"

namespace tq::kernels {

// How KvEncode picks a coded vector's per-group scale σ (kv/turboquant_codec.h): the group's RMS
// ("norm"), the MSE-optimal scale ("mse": σ = ⟨x, c⟩/⟨c, c⟩ alternated with re-assignment, three
// rounds, never worse than the RMS), or "unbiased" (the mse codes with σ = ‖x‖²/⟨x, c⟩).
enum class KvScale { kNorm, kMse, kUnbiased };

// One code segment of a vector: channels [begin, end) coded in `format` against `levels`.
struct KvCodeSegment {
  int64_t begin = 0, end = 0;
  quant::CodeFormat format = quant::CodeFormat::kQ4;
  const float* levels = nullptr;  // [levels of format], ascending
  // [levels - 1] the codebook's decision thresholds, ascending (the midpoints of the levels): a
  // value x codes to #{t < x} (quant::Codebook::Encode). Read by KvEncode; attention needs only
  // the levels.
  const float* thresholds = nullptr;
  int64_t byte_offset = 0;  // where the segment's packed codes start in a vector's bytes
  // Levels equally spaced (levels[c] = lo + c * step): decoded with a convert instead of a lookup.
  bool uniform = false;
  float lo = 0.0f, step = 0.0f;
};

// How one coded vector of `dim` channels is stored: packed codes (quant/packing.h, segment after
// segment) then, in a separate array, dim / group fp16 scales.
struct KvCodeFormat {
  int64_t dim = 0;
  int64_t group = 0;       // channels per scale; divides dim
  int64_t code_bytes = 0;  // packed bytes of one vector
  int num_segments = 0;    // 1 or 2 (fractional widths: some channels at b+1 bits)
  KvCodeSegment segments[2];
  int64_t groups() const { return group > 0 ? dim / group : 0; }
};

// A run of positions [begin, end) of one layer, stored either as rotated fp16 vectors or as codes.
// Kv head h, position t: fp16 at k16 + (h * head_stride + t - begin) * dim (v16 likewise); codes
// at k_codes + (h * head_stride + t - begin) * code_bytes, scales at
// k_scales + (h * head_stride + t - begin) * groups.
struct KvSpan {
  int64_t begin = 0, end = 0;
  int64_t head_stride = 0;  // positions between kv heads
  bool coded = false;
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  const uint8_t* k_codes = nullptr;
  const uint8_t* v_codes = nullptr;
  const uint16_t* k_scales = nullptr;  // fp16
  const uint16_t* v_scales = nullptr;
  // QJL sketch of coded keys (view.qjl_matrix set): k_qjl + (h * head_stride + t - begin) *
  // QjlSignBytes(m) holds sign(S r) (bit j of byte j / 8 set: (S r)_j >= 0); k_qjl_norm the same
  // slot's ‖r‖ (fp16).
  const uint8_t* k_qjl = nullptr;
  const uint16_t* k_qjl_norm = nullptr;
};

// One compressed layer: its spans in position order, covering 0 .. (last end) without gaps.
struct CompressedKvView {
  const quant::HadamardRotation* k_rotation = nullptr;  // dim = head_dim
  const quant::HadamardRotation* v_rotation = nullptr;
  KvCodeFormat k_format, v_format;
  static constexpr int kMaxSpans = 3;  // sink, coded middle, recent window
  KvSpan spans[kMaxSpans];
  int num_spans = 0;
  // Mean-centering: every stored value is v' - μ'_V, so the output adds μ'_V back (Σ p_t = 1):
  // [num_kv_heads, dim] rotated, or null. (Keys are centered too, but q·μ_K is the same for every
  // position of a query, and softmax drops it.)
  const float* v_offset = nullptr;
  // QJL residual sketch of the coded keys: S [qjl_m, dim] row-major (i.i.d. N(0, 1)), or null.
  const float* qjl_matrix = nullptr;
  int64_t qjl_m = 0;
  // Outlier-channel split (the paper's; kv/turboquant_kv_cache.h): the channel order of kv head
  // h, [num_kv_heads, dim] (outlier channels first), or null = identity. The stored rotated key is
  //   k'_j = (R_k y)_j,  y_j = k[k_order[h * dim + j]],
  // R_k block-diagonal with blocks inside each subset (each subset has its own rotation), so
  //   q·k = q_out·k_out + q_rest·k_rest = (R_k P q)·k'  and  out = Pᵀ R_vᵀ Σ p_t v'_t.
  const int32_t* k_order = nullptr;
  const int32_t* v_order = nullptr;
};

// Bytes of one key's sign bits: ceil(m / 8).
inline int64_t QjlSignBytes(int64_t m) { return (m + 7) / 8; }
// The estimator's factor √(π/2) / m (multiplied by ‖r‖ and the sign dot product).
double QjlFactor(int64_t m);
// out [m] = S [m, dim] · x [dim].
void QjlProject(const float* s, int64_t m, int64_t dim, const float* x, float* out);
// ⟨sq, sign⟩ = Σ_j (bit j set ? sq_j : -sq_j) over m sign bits (the sketch term before ‖r‖ and
// QjlFactor). Scalar reference.
double QjlSignDot(const float* sq, const uint8_t* bits, int64_t m);

// Causal attention of q [n, num_heads, head_dim] at positions pos0 .. pos0+n-1 over positions
// 0 .. pos0+n-1 of a compressed layer -> out [n, num_heads, head_dim]. Same contract as
// Attention() in ops.h; runs on the active backend (ref: RefCompressedAttention, else cpu).
void CompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                         const AttentionParams& p, float* out);

// The backends (for tests and benchmarks).
void RefCompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                            const AttentionParams& p, float* out);
void CpuCompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                            const AttentionParams& p, float* out);

// The cpu backend scores coded keys in int8 (query quantized per row, levels to int8, VNNI dot
// products; kv_attention_int8.inc) when the CPU has AVX-512 VNNI and the key format allows it.
// On by default; off gives fp32 scores that match RefCompressedAttention to rounding (tests).
void SetKvInt8Scoring(bool on);
bool KvInt8Scoring();

// What KvEncode writes (Backend::KvEncode): the format (levels and thresholds in the backend's
// memory), the scale rule, and optionally the QJL residual sketch of each coded vector
// (qjl_matrix S [qjl_m, dim], or null).
struct KvEncodeParams {
  KvCodeFormat format;
  KvScale scale = KvScale::kMse;
  const float* qjl_matrix = nullptr;
  int64_t qjl_m = 0;
};
// Where KvEncode writes: slot s of a layer's coded positions holds codes + s * code_bytes, scales
// + s * groups (fp16) and, with the sketch, qjl_bits + s * QjlSignBytes(m) and qjl_norm + s.
// Kv head h, position i of an encode go to slot h * head_stride + slot0 + i.
struct KvCodeSlots {
  uint8_t* codes = nullptr;
  uint16_t* scales = nullptr;
  uint8_t* qjl_bits = nullptr;
  uint16_t* qjl_norm = nullptr;
  int64_t head_stride = 0;  // slots between kv heads
};

// The scalar codec of one rotated vector x [dim] -> codes [code_bytes], scales [groups] (fp16):
// per group, σ by `scale` (the stored fp16 value is what codes are assigned against; sums in
// double in channel order), codes = nearest level of x / σ, packed per segment
// (quant/packing.h). The reference every backend's KvEncode matches.
void EncodeKvVector(const KvCodeFormat& f, KvScale scale, const float* x, uint8_t* codes,
                    uint16_t* scales);
// The QJL sketch of a residual r [dim]: bits [QjlSignBytes(m)] = sign(S r) (bit j set: (S r)_j >=
// 0, S r by QjlProject), *norm = ‖r‖ (fp16, 65504 when it overflows).
void EncodeQjlResidual(const float* s, int64_t m, int64_t dim, const float* residual, uint8_t* bits,
                       uint16_t* norm);

// Decodes one coded vector into its rotated channels: out[i] = scale[i / group] * level(code_i).
void DecodeKvVector(const KvCodeFormat& f, const uint8_t* codes, const uint16_t* scales,
                    float* out);

// Throws tq::Error naming `where` if the view is inconsistent (spans not contiguous from 0,
// formats whose dim differs from head_dim, missing pointers, a QJL matrix without sketches).
void CheckCompressedKvView(const CompressedKvView& kv, const AttentionParams& p, int64_t end,
                           const char* where);

}  // namespace tq::kernels
