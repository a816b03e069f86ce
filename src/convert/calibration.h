// Self-calibration (issue 18, lever 2; `convert --self-calibrate N`): the source model writes its
// own calibration text (no external data) and runs it through its float forward pass while the
// input of every quantizable decoder linear is recorded as a second moment
//   H = E[x xᵀ]  [in, in]   (x one token's input row, as the float model computes it),
// which error-feedback rounding (quant/error_feedback.h) uses in the linear's rotated basis
// (RotatedMoment: R H Rᵀ, R the Hadamard rotation convert applies to that input).
//
// Text: ceil(N / sequence_tokens) sequences; each starts at a uniformly random token and is
// continued by the model itself (self_text.h, all sequences side by side in batched decode steps)
// at temperature kCalibrationTemperatures[s % 3] (0.8, 1.0, 1.2: around the model's own
// distribution, some text sharper, some more varied); the last one is cut so that the total is
// N tokens. Deterministic for the seed.
//
// Recording: the model is loaded on a recording backend (the cpu backend's ops, plus a hook in
// MatMul / MatMulGroup) that knows each linear's weight by a checksum of its bytes, so the
// forward pass (src/model) is unchanged. Linears over the same input in one call (q/k/v,
// gate/up, an expert's gate/up) share one moment object.
//
// Whole or per-block moments: H is kept whole ([in, in] doubles: 16 MB for in = 1408) when the
// whole moments of all linears fit in kMaxWholeMomentBytes (the shared models: ~0.2 GB). Past
// that (an 8B shape: 1.6 GB for one 14336-wide down_proj input, ~65 GB for 32 layers, and
// Cholesky / feedback costs of in³ and rows · in² per linear) each input is rotated as convert
// will rotate it (R x: the linear's rotation group and seed) and only the diagonal blocks
// [b, b] of E[(R x)(R x)ᵀ] are kept (b = kMomentBlock, or the largest power of two below it that
// divides in): in · b doubles per input, and the error feedback (block-diagonal H, see
// error_feedback.h) then runs inside each block, rows · in · b per linear.
// TURBOQUANT_CALIBRATION_BLOCK=b (0 = whole) overrides the automatic choice (measurements).
// MoE experts: each expert's H comes from the tokens routed to it; an expert that saw fewer than
// min_expert_tokens (default: its input dimension — below that H is singular) uses the pooled H
// of all experts of its layer and projection (Σ of their sums / Σ of their counts).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/quant_recipe.h"
#include "quant/hadamard.h"

namespace tq {

inline constexpr double kCalibrationTemperatures[] = {0.8, 1.0, 1.2};
inline constexpr int64_t kMinCalibrationTokens = 64;
inline constexpr int64_t kMaxCalibrationTokens = int64_t(1) << 20;
inline constexpr int64_t kMaxWholeMomentBytes = int64_t(2) << 30;  // 2 GiB of doubles
inline constexpr int64_t kMomentBlock = 256;

struct CalibrationOptions {
  int64_t tokens = 2048;          // N, in [kMinCalibrationTokens, kMaxCalibrationTokens]
  int64_t sequence_tokens = 256;  // tokens per sampled sequence
  uint64_t seed = 0;  // convert's --seed: of the text, and of the rotations of per-block moments
  int64_t min_expert_tokens = 0;  // 0: the expert's input dimension
  // -1: automatic (above; TURBOQUANT_CALIBRATION_BLOCK if set); 0: whole H; b > 0: per-block
  // moments of (at most) b.
  int64_t moment_block = -1;
  bool progress = true;
};

// The input second moment of one or more linears that read the same input.
struct InputMoments {
  int64_t dim = 0;
  int64_t tokens = 0;  // input rows it averages
  // block == 0: [dim, dim], symmetric: E[x xᵀ] (unrotated). block > 0: the dim / block diagonal
  // blocks [block, block] (one after another) of E[(R x)(R x)ᵀ], R the linear's rotation (none:
  // the identity); the rest is not kept.
  std::vector<double> h;
  int64_t block = 0;
  bool pooled = false;  // an expert's fallback: its layer's pooled moment
};

struct CalibrationResult {
  // "<prefix>.weight" of each calibrated linear -> its input moment (shared by linears over one
  // input). Linears the text never reached are absent (they keep nearest rounding).
  std::map<std::string, std::shared_ptr<const InputMoments>> moments;
  int64_t tokens = 0;          // calibration tokens run
  int64_t pooled_experts = 0;  // expert linears that fell back to the pooled moment
  int64_t expert_linears = 0;  // expert linears calibrated (own or pooled)
  int64_t moment_block = 0;    // 0: whole moments; else per-block moments of (at most) this
  double seconds = 0;
};

// Samples the text and records the moments of the quantized decoder linears of `recipe` (the
// model at model_dir: bf16/fp16/fp32). `read(i)` returns the source bytes of recipe.tensors[i].
// Throws tq::UsageError for N out of range, tq::Error if the model cannot be run.
CalibrationResult SelfCalibrate(const std::string& model_dir, const QuantRecipe& recipe,
                                const CalibrationOptions& opts,
                                const std::function<std::vector<uint8_t>(size_t)>& read);

// R H Rᵀ [dim, dim] (the moment of R x); rot null: H itself. Per-block moments (already in the
// rotated basis) come out dense with zeros outside their blocks.
std::vector<double> RotatedMoment(const InputMoments& m, const quant::HadamardRotation* rot);

// The block of per-block moments for an input of `dim` features: the largest power of two <= b
// that divides dim.
int64_t MomentBlockFor(int64_t dim, int64_t b);

}  // namespace tq
