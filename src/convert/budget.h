// `--budget-bpw X`: re-chooses the code format and group size of every quantized decoder linear so
// that the stored bits per linear weight (codes + group scales, fp16 or e8, + the e8 tables:
// quant_recipe.h LinearStoredBits, ScaleTableBits) average at most X, from each
// tensor's own quantization error (quant::QuantizationError on its rotated weights; no
// calibration data).
//
// Objective: minimise Σ_t importance_t · n_t · relative_error_t(choice) (n_t = the tensor's weight
// count; kPerTensor drops n_t) subject to the bit budget,
// greedily: start every tensor at its cheapest candidate, then repeatedly take the upgrade with
// the largest error reduction per added bit until the budget is spent. relative_error is
// ‖W - Ŵ‖² / ‖W‖² (the relative output perturbation for an isotropic input); importance weighs
// the tensors whose errors hurt most (v_proj and down_proj, the first and last layers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/quant_recipe.h"
#include "quant/quantized_matrix.h"

namespace tq {

struct BudgetOptions {
  double target_bits = 4.25;  // per linear weight: codes + scales
  quant::ScaleMode scale = quant::ScaleMode::kMseSearch;
  uint64_t seed = 0;
  // kPerTensor: every tensor's relative error counts alike (small tensors are cheap to improve);
  // kPerWeight: it is weighted by the tensor's size (all weights count alike).
  enum class Objective { kPerTensor, kPerWeight } objective = Objective::kPerWeight;
  double sensitive_weight = 2.0;  // importance of v_proj / down_proj
  // Importance multiplier of the first and last layer; 0 = DefaultEdgeLayerWeight(target_bits,
  // the recipe's scale format).
  double edge_layer_weight = 0;
  std::vector<int> bits = {2, 3, 4, 8};
  // Candidate groups; with e8 scales (recipe.options.scale_format) also 16 (q3 g16 = 3.5 bits,
  // q2 g16 = 2.5 bits).
  std::vector<int> groups = {32, 64, 128};
  bool progress = true;
  // Whole-file budget (--target-size): > 0 = bytes of all safetensors data (every tensor, its
  // codebook, signs and e8 tables, and an estimate of the header); target_bits is then unused and
  // the embedding / LM head are candidates too (q4 / q8 in groups of 32-128 with fp16 scales, or
  // kept as stored). The recipe must have them quantized (convert plans them at 8 bits first).
  int64_t target_bytes = 0;
  bool embeddings = true;  // with target_bytes and alpha: the embedding / LM head are candidates
  // Measured sensitivities (sensitivity.h), by tensor name: when non-empty, the objective is
  // Σ α_t · relative_error_t(choice) (the linearity theorem) and the priors above are unused.
  std::map<std::string, double> alpha;
};

struct BudgetChoice {
  std::string name;
  int bits = 0;
  int group_size = 0;
  double relative_error = 0;
  double importance = 1;
  int64_t bytes = 0;  // codes + scales + codebook (kept: as stored)
};

// "13.2MB", "13.2 MB", "12.5MiB", "1.5GB", "1.5GiB", "800K", "123456" (bytes) -> bytes
// (K/M/G/T = 10^3.. and KiB/MiB/GiB/TiB = 2^10..; a trailing B optional). Throws tq::UsageError
// naming `flag` for anything else or a size <= 0.
int64_t ParseFileSize(std::string_view text, std::string_view flag = "--target-size");

// Bytes of a safetensors header holding the outputs of `recipe` (an upper estimate: 84 bytes of
// JSON per output tensor plus its name; measured 65 + the name).
int64_t EstimatedHeaderBytes(const QuantRecipe& recipe);

// The default first/last-layer multiplier. Measured (full protocol, both files; BENCHMARKS.md
// "Weight quantization"): with e8 scales, 4 beats 2 at 3.5 bits on both models and at 4.25 on
// tq-llama-21m (tq-qwen3moe-17m: within noise), but at 2.5 bits it is 3.4 points worse on
// tq-llama-21m (upgrading all edge-layer linears starves the rest of q3); with fp16 scales (session
// 2) 4 was ~1 point worse on tq-qwen3moe-17m at 3.5. Hence 4 for e8 budgets of >= 3 bits, else 2.
double DefaultEdgeLayerWeight(double target_bits, quant::ScaleFormat scale_format);

// Rewrites the format, group size, rotation block and projected bytes of the quantized decoder
// linears of `recipe` (with target_bytes also of the embedding / LM head). `read` returns a
// tensor's source bytes. Returns the per-tensor choices. Throws tq::UsageError if even the cheapest
// candidates exceed the budget (naming --budget-bpw or
// --target-size and the least reachable value).
std::vector<BudgetChoice> AllocateBitBudget(
    QuantRecipe& recipe, const BudgetOptions& opts,
    const std::function<std::vector<uint8_t>(const TensorDecision&)>& read);

}  // namespace tq
