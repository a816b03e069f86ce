// The quantization recipe: for a Hugging Face checkpoint (config + safetensors headers) and the
// user's options, what happens to every tensor — kept as stored or quantized at which bit width,
// group size and rotation — and how many bytes the result takes. `convert` carries these
// decisions out and `plan` projects sizes from them, so the projection is the conversion.
//
// Rules (DESIGN.md §2, docs/FORMAT.md):
// - Quantized: the decoder linears (attention q/k/v/o, MLP gate/up/down, expert gate/up/down), and
//   the embedding / LM head when embed_bits < 16. Kept: router, norms, biases, anything unknown
//   or not a 2-D float tensor.
// - Bits of a linear: a protected layer's linears get protect_bits (16 = kept); else attention
//   attn_bits, dense MLP mlp_bits, experts mlp_bits, or ternary (1.6 bits) with ternary_experts;
//   expert down projections expert_down_bits when set. Unset (0) values fall back to `bits`.
// - Rotation: Hadamard blocks of b = the largest power of two dividing `in` (<= 4096) with
//   b >= group size; if b < group size, the group shrinks to b (b >= 32); if b < 32, no rotation.
//   Without rotation the group is the largest of group, group/2, ..., 32 dividing `in`; if none
//   does, the tensor is kept. The embedding is a lookup table: never rotated.
// - Linears that read the same input share one stored sign vector (q/k/v; gate/up; each
//   projection of all experts of a layer): its bytes are counted once per group.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "model/tensor_roles.h"
#include "quant/format.h"
#include "quant/hadamard.h"
#include "quant/quantized_matrix.h"

namespace tq {

struct ModelConfig;

enum class RotationKind : uint8_t { kHadamard, kNone };
std::string_view RotationKindName(RotationKind r);                  // "hadamard", "none"
std::optional<RotationKind> ParseRotationKind(std::string_view s);  // the same spellings

struct QuantRecipeOptions {
  int bits = 4;         // 2, 3, 4 (8 allowed): every quantized linear unless overridden below
  int group_size = 64;  // 32, 64, 128
  quant::QuantMethod method = quant::QuantMethod::kCodebook;  // turboquant | affine
  int attn_bits = 0;                                          // 0 = bits
  int mlp_bits = 0;                                           // dense MLP and experts; 0 = bits
  int mlp_group_size = 0;                                     // MLP and experts; 0 = group_size
  bool ternary_experts = false;  // expert projections at 1.6 bits (codebook method only)
  int expert_down_bits = 0;      // expert down projections; 0 = as the other expert projections
  std::string protect_layers;    // "0-1,22-23": layers whose linears get protect_bits
  int protect_bits = 8;          // 2, 3, 4, 8, or 16 = keep as stored
  int embed_bits = 16;           // embedding and LM head: 4, 8, or 16 = keep as stored
  // Per-tensor overrides of decoder linears, applied last: "down_proj=4,layers.0.=8" — a linear
  // whose name contains the text before '=' gets those bits (2, 3, 4, 8, 16 = keep); the last
  // matching item wins. For experiments (per-tensor sensitivity) and hand-made recipes.
  std::string tensor_bits;
  RotationKind rotation = RotationKind::kHadamard;
  int64_t max_hadamard_block = quant::kDefaultMaxHadamardBlock;
  // Group scales of the decoder linears (codebook method): fp16, or e8 (one byte per group + a
  // per-tensor table, quant/e8_scales.h). The embedding / LM head always keep fp16 scales.
  // group_size 16 is allowed with e8 only.
  quant::ScaleFormat scale_format = quant::ScaleFormat::kF16;
};

// Checks option values; throws tq::UsageError naming the option ("--attn-bits 5: ...").
void ValidateQuantRecipeOptions(const QuantRecipeOptions& opts);

// "0-1,22-23" / "5" / "" -> sorted distinct layer indices in [0, num_layers). Throws
// tq::UsageError naming `flag` and the bad part (syntax, reversed range, out of range).
// "down_proj=4,layers.0.=8" -> {{"down_proj", 4}, {"layers.0.", 8}}. Throws tq::UsageError naming
// --tensor-bits and the bad item.
std::vector<std::pair<std::string, int>> ParseTensorBits(std::string_view spec);

std::vector<int64_t> ParseLayerRanges(std::string_view spec, int64_t num_layers,
                                      std::string_view flag = "--protect-layers");

// Group size and rotation block for a linear with `in` input features (rules above).
struct GroupChoice {
  bool quantizable = false;  // false: no group size >= 32 divides `in`
  int group_size = 0;
  int64_t rotation_block = 0;  // 0 = no rotation
  std::string note;            // why the request was not met (empty when it was)
};
GroupChoice ChooseGroup(int64_t in, int group_size, RotationKind rotation,
                        int64_t max_block = quant::kDefaultMaxHadamardBlock);

// Bytes of one quantized [rows, cols] matrix: packed codes + group scales (fp16, or one e8 code
// per group) (+ fp16 minimums for affine) + the fp32 codebook (codebook method). Signs and e8
// scale tables are counted by the caller (shared by a group of linears).
int64_t QuantizedTensorBytes(int64_t rows, int64_t cols, quant::CodeFormat format, int group_size,
                             quant::QuantMethod method,
                             quant::ScaleFormat scales = quant::ScaleFormat::kF16);
// Bytes of one stored e8 scale table (256 fp32 values).
inline constexpr int64_t kE8TableBytes = int64_t(quant::kE8TableSize) * 4;
// The stored bits of a quantized linear that count toward "bits per linear weight": codes + group
// scales (+ minimums). Its codebook and sign vector are left out; an e8 table (shared by a
// rotation group) is added once per table by the callers (docs/FORMAT.md).
double LinearStoredBits(int64_t rows, int64_t cols, quant::CodeFormat format, int group_size,
                        quant::QuantMethod method, quant::ScaleFormat scales);
// Bytes of one stored sign vector of n elements (1 bit each, docs/FORMAT.md).
int64_t SignBytes(int64_t n);

struct TensorDecision;
// Sets d.scale_table from d's rotation group (or name) when d has e8 scales, else clears it.
void AssignScaleTable(TensorDecision& d);
// Bits of the distinct e8 scale tables of the quantized decoder linears of `decisions`.
double ScaleTableBits(const std::vector<TensorDecision>& decisions);

struct TensorDecision {
  std::string name;
  TensorRole role = TensorRole::kOther;
  int64_t layer = -1;   // -1: not in a decoder layer
  int64_t expert = -1;  // -1: not an expert
  DType dtype = DType::F32;
  Shape shape;
  bool quantize = false;
  std::optional<quant::CodeFormat> format;  // when quantized
  double bits = 0;                          // per code: 0 = unchanged, 1.6 = ternary, 2, 3, 4, 8
  int group_size = 0;
  quant::ScaleFormat scale_format = quant::ScaleFormat::kF16;  // when quantized
  // e8 scales: the name of the stored table tensor, shared by the linears of one rotation group
  // ("model.layers.3.attn_in.scale_table"; unrotated: "<prefix>.scale_table"). Empty otherwise.
  std::string scale_table;
  int64_t rotation_block = 0;  // 0 = none
  // Linears sharing one sign vector have the same key ("model.layers.3/attn_in"); empty if none.
  std::string rotation_group;
  int64_t source_bytes = 0;     // as stored now
  int64_t projected_bytes = 0;  // after conversion, incl. scales, codebook and (first member of
                                // its rotation group) signs and e8 scale table
  std::string note;             // a fallback that was taken, or why the tensor is kept
};

struct QuantRecipe {
  QuantRecipeOptions options;
  std::vector<int64_t> protected_layers;
  std::vector<TensorDecision> tensors;  // in the order of the input tensor list
  int64_t source_bytes = 0;
  int64_t projected_bytes = 0;
  int64_t projected_expert_bytes = 0;  // of which expert projections (MoE streaming)
  std::vector<std::string> notes;      // one line per distinct fallback ("in=96: group 64 -> 32")
};

// Decides every tensor of `tensors` (a checkpoint's headers, any order). Throws tq::UsageError on
// bad options and tq::Error for an unsupported model_type.
QuantRecipe PlanQuantization(const ModelConfig& config, const std::vector<TensorInfo>& tensors,
                             const QuantRecipeOptions& opts);

}  // namespace tq
