// `turboquant convert`: a Hugging Face bf16/fp16/fp32 checkpoint directory -> a TurboQuant
// checkpoint directory (docs/FORMAT.md). The per-tensor decisions come from the quantization
// recipe (model/quant_recipe.h: what `plan` projects), optionally re-chosen per tensor by the
// bit-budget allocator (budget.h); this file carries them out.
//
// Output is written into ".<out>.tmp-convert-<pid>" next to `out` and renamed at the end (with
// --force, atomically exchanged with the old `out`), so an interrupted convert leaves nothing
// that looks like a model; temp dirs of converts that were killed (their pid is gone) are removed
// by the next convert to the same `out`.
//
// The input must be an unquantized checkpoint (bf16/fp16/fp32 linears): a TurboQuant checkpoint
// or another tool's quantized one (GPTQ, AWQ, bitsandbytes ...) is refused with a tq::UsageError.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "convert/sensitivity.h"
#include "model/quant_recipe.h"
#include "quant/quantized_matrix.h"

namespace tq {

struct ConvertOptions {
  std::string model_dir;
  std::string out_dir;
  QuantRecipeOptions recipe;
  quant::ScaleMode scale = quant::ScaleMode::kMseSearch;  // --scale rms | mse
  double budget_bpw = 0;                 // > 0: choose bits and group per linear (budget.h)
  bool budget_per_weight = true;         // BudgetOptions::Objective::kPerWeight
  double budget_sensitive_weight = 2.0;  // BudgetOptions::sensitive_weight
  double budget_edge_weight = 0;         // BudgetOptions::edge_layer_weight (0 = default)
  // --target-size: > 0 = the bytes of the whole output's safetensors (budget.h target_bytes); the
  // allocator then also chooses the embedding / LM head (with measured sensitivities).
  int64_t target_bytes = 0;
  // Budget objective: measured per-tensor sensitivities (sensitivity.h; noise injection, random
  // tokens) instead of the role / depth priors. Default on with --target-size.
  bool measure_sensitivity = false;
  // With --target-size and measured sensitivities: the allocator also chooses the embedding / LM
  // head (false: they stay as recipe.embed_bits decides, e.g. an explicit --embed-bits).
  bool budget_embeddings = true;
  SensitivityOptions sensitivity;
  // Reuse the sensitivities recorded in another converted checkpoint of the same source (its
  // config.json "sensitivity" per tensor) instead of measuring them again.
  std::string sensitivity_from;
  // --self-calibrate N: > 0 = the model samples N tokens of its own text, the input second moment
  // of every decoder linear is recorded on them (calibration.h), and the linears' codes are chosen
  // by error-feedback rounding against it (quant/error_feedback.h; same format). 0: nearest
  // rounding, no data of any kind (the default).
  int64_t self_calibrate_tokens = 0;
  double calibration_damp = 0.1;         // λ of the error feedback: H + λ·mean(diag H)·I
  bool calibration_lazy_scales = false;  // quant::ErrorFeedbackOptions::lazy_scales
  uint64_t seed = 0;                     // sign vectors: group g uses SplitMix64(seed ^ FNV-1a(g))
  bool streaming = false;  // one source tensor in memory at a time (else the whole model)
  bool force = false;      // replace an existing out_dir
  bool progress = true;
  uint64_t shard_bytes = uint64_t(2) << 30;  // shard the output above this many bytes
  // Tensors are converted to fp32 and quantized in row chunks of at most this many values.
  int64_t chunk_floats = int64_t(16) << 20;
  // Test hook: throw after writing this many source tensors (simulates an interruption).
  int64_t fail_after_tensors = -1;
  // Set (by a signal handler) to stop: Convert throws between tensors and removes its temp dir.
  const std::atomic<bool>* cancel = nullptr;
};

struct ConvertSummary {
  int64_t source_tensors = 0;
  int64_t output_tensors = 0;
  int64_t quantized_tensors = 0;
  int64_t output_bytes = 0;  // tensor bytes written (all shards)
  int64_t file_bytes = 0;    // the safetensors files (headers included): what --target-size sizes
  int64_t num_shards = 0;
  // Decoder linears: stored bits (codes + group scales + e8 tables) / weights.
  double linear_bits_per_weight = 0;
  double seconds = 0;
  int64_t peak_rss_bytes = 0;
};

// Runs the conversion. Throws tq::UsageError for bad options (an existing out_dir without force)
// and tq::Error for bad input; in every failure case out_dir is untouched and the temp dir gone.
ConvertSummary Convert(const ConvertOptions& opts);

// The per-tensor sensitivities ("<prefix>.weight" -> α) recorded in a converted checkpoint's
// config.json. Throws tq::Error naming the file if there are none.
std::map<std::string, double> ReadRecordedSensitivities(const std::string& dir);

// The seed of a rotation group's sign vector (docs/FORMAT.md "Sign generation").
uint64_t RotationGroupSeed(uint64_t seed, const std::string& group);
// The tensor-name form of a recipe rotation group key: "model.layers.3/attn_in" ->
// "model.layers.3.attn_in" (its signs are "<that>.signs").
std::string RotationGroupName(const std::string& key);
// "model.layers.0.self_attn.q_proj.weight" -> "model.layers.0.self_attn.q_proj".
std::string ModulePrefixOf(const std::string& tensor_name);

// Writes a float32 copy of a TurboQuant checkpoint: every packed tensor dequantized and
// un-rotated to "<prefix>.weight" [out, in] F32, everything else copied, config.json without the
// quantization block. For tests and debugging: the model it gives computes exactly what the
// packed model computes (up to float rounding).
void WriteDequantizedCheckpoint(const std::string& packed_dir, const std::string& out_dir);

}  // namespace tq
