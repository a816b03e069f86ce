// turboquant-mlx checkpoints (the Apple-Silicon TurboQuant library on mlx-lm,
// github.com/manjunathshiva/turboquant-mlx) read as the native TurboQuant checkpoints they stand
// for, so that every verb runs them unchanged and `convert --repack` writes them natively.
//
// Their layout, per quantized linear <p> (y = W x, W [out, in]; from the library's
// core/packing.py, core/rotation.py, core/polar_quantize.py, layers/polar_linear.py,
// layers/polar_switch_linear.py and the loader in generate.py):
//   <p>.weight     U32 [out, ceil(in / (32 / b))]: b-bit codes, 32 / b per word, LSB first (3 bits:
//                  10 per word, the top 2 bits unused); ternary: base 3, 20 trits per word,
//                  word = sum_i t_i 3^i
//   <p>.scales     F16 [out, in / g]: group scales (the group RMS)
//   <p>.codebook   F16 [K]: the levels, K = 2^b (2, 4, 8, 16) or 3 (ternary)
//   <p>.signs      F16 [in]: the ±1 of the input rotation x' = blockdiag(H_B) diag(s) x / sqrt(B),
//                  B the largest m * 2^k dividing `in` with m in {1, 12, 20, 28}
//                  (mx.hadamard_transform); all +1 when the weights are not rotated
//   <p>.bias       F16 [out] (optional)
//   <p>.qjl_packed, <p>.qjl_norms, <p>.qjl_signs: the QJL residual correction (use_qjl)
//   MoE experts (mlx-lm SwitchLinear) <X>.switch_mlp.{gate,up,down}_proj: weight and scales with a
//   leading expert dimension E, one codebook and one sign vector for all experts.
// The input is rotated online ("needs_rotation") iff quantization.rotation != "none" or the
// stored signs hold a -1 (their loader's rule for files written before "none" was honoured);
// otherwise the weights are used as stored (the rotation fused away). With fuse_rotations = true
// the projections their integration/rotation_configs.py fuses for the model_type (LLaMA-style:
// q/k/v_proj into input_layernorm, gate/up_proj into post_attention_layernorm) take their input
// unrotated, the stored norm weights as they are: what their PolarQuantizedLinear computes with
// needs_rotation = false. A model_type their configs do not list is an error.
// QJL (use_qjl, per linear <p>.qjl_packed U32 [out, ceil(in / 32)] LSB-first bits, qjl_norms F16
// [out], qjl_signs F16 [in]): y += α ν_i ⟨b_i, S x'⟩ on the rotated input x', α = √(π/2)/√in,
// S = blockdiag(H) diag(σ) / √block (their core/qjl.py). That is linear in x, so such a linear is
// imported as one dense F32 weight Rᵀ (deq + α ν Sᵀ b) (exact; 4 bytes per weight, said in the
// start-up line). TQ_MLX_SKIP_QJL=1 drops the tensors instead (turboquant-mlx's --fast mode).
// config.json: the model's config plus "quantization": {"mode": "turboquant", "bits",
// "group_size", "use_qjl", "rotation", "rotation_seed", "fuse_rotations", ...} (their
// TurboQuantConfig.to_dict) and no "format_version" (which is how it is told from ours).
//
// Import: codes are unpacked and repacked into our dense layouts (quant/packing.h) in memory,
// codebooks become F32 (ascending; codes are remapped if a stored codebook is not), signs become
// HadamardSigns bits with block B, one rotation group per source linear (all experts of a
// projection share theirs); scales, biases and every other tensor are served from the mapped
// shards as stored, expert slices under the Hugging Face per-expert names. Their rotation is
// exactly ours (quant/hadamard.h, blocks m * 2^k with mx.hadamard_transform's H_12, H_20, H_28):
// R x = blockdiag(H_B) diag(s) x / sqrt(B).
// Not supported, each an error naming the tensor or option: QJL on stacked experts, Hadamard
// blocks that are no multiple of 8, MLX affine-quantized tensors (affine_extras), quantization
// keys this build does not know, fuse_rotations for a model_type their configs do not list.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/checkpoint.h"

namespace tq::tqmlx {

inline constexpr const char* kFormatName = "turboquant-mlx";

// True when `config_json` has a turboquant-mlx quantization block (mode "turboquant" and no
// format_version). Invalid JSON gives false (the config parser reports it).
bool IsTqMlxConfig(const std::string& config_json);
// The same for <dir>/config.json; false when there is none.
bool IsTqMlxDir(const std::string& dir);

// Opens <dir> as the native checkpoint it stands for. headers_only: tensors declared with dtype
// and shape but no data (what plan/doctor/inspect need; only signs and codebooks are read).
std::unique_ptr<Checkpoint> Import(const std::string& dir, bool headers_only = false);
// The config.json text of that native checkpoint: the source's, with its quantization block
// replaced by ours (docs/FORMAT.md) and kept as "source_quantization".
std::string NativeConfigJson(const std::string& dir);
// One line for start-up messages: "turboquant-mlx checkpoint: 42 linears (q3 g64, rotated),
// repacked in memory".
std::string Describe(const std::string& dir);
// Import (not headers_only) reports "<dir>: <Describe>" through this; the default prints the line
// to stderr (the verbs' start-up line). An empty function silences it (library users).
void SetNotice(std::function<void(const std::string&)> fn);

// The block of mx.hadamard_transform's blockwise use in turboquant-mlx: the largest m * 2^k
// (m in {1, 12, 20, 28}) dividing n (n > 0).
int64_t MlxHadamardBlock(int64_t n);
// Unpacks n codes from turboquant-mlx words: bits 1..8 (32 / bits codes per word, LSB first) or
// 0 for trits (20 per word, base 3, least significant first). Reads ceil(n / per_word) words.
// A trit word >= 3^20 throws (naming `where`).
void UnpackWords(const uint32_t* words, int bits, int64_t n, uint8_t* codes,
                 const std::string& where);

}  // namespace tq::tqmlx
