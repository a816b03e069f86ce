// A writer of turboquant-mlx checkpoints for the tests, written from the documented layout
// (io/tqmlx_import.h), not from the importer: RMS group scales, nearest-level codes of the fp16
// Lloyd-Max codebook, 32 / b codes per uint32 LSB first (trits: 20 per word, base 3), ±1 fp16
// signs with mx.hadamard_transform's blocks, MoE experts stacked as mlx-lm's switch_mlp.
// Optionally also writes the float twin: a Hugging Face checkpoint whose linears are exactly
// the dequantized, un-rotated weights (fp32) — what a correct import must compute.
#pragma once

#include <cstdint>
#include <string>

namespace tq::test {

struct TqMlxWriteOptions {
  int bits = 3;                  // 1, 2, 3, 4 for every quantized linear
  bool ternary_experts = false;  // MoE experts as trits (3-level codebook)
  int group_size = 64;
  std::string rotation = "hadamard";  // "none": unrotated weights, all +1 signs
  bool legacy_rotated_none = false;   // rotation "none" in config.json but rotated weights
  bool reverse_codebook = false;      // store the codebook descending (codes follow)
  bool qjl = false;                   // use_qjl + QJL residual tensors on the dense linears
  bool fuse_rotations = false;  // fuse_rotations: q/k/v/gate/up_proj rotated, input not rotated
  uint64_t seed = 7;
  std::string float_twin_dir;  // "" = none
};

// hf_dir: a shared model (bf16 Hugging Face checkpoint). Writes out_dir (config.json,
// model.safetensors, tokenizer files). With qjl the twin holds the QJL-corrected weights
// Rᵀ (deq + α ν Sᵀ b) (their core/qjl.py); with fuse_rotations the fused projections' twin is the
// dequantized rotated-basis weights as they are (their needs_rotation = false).
void WriteTqMlxCheckpoint(const std::string& hf_dir, const std::string& out_dir,
                          const TqMlxWriteOptions& opts);

}  // namespace tq::test
