// Tiny random checkpoints of every supported architecture, and a naive decoder (llama2.c style,
// double precision, full recompute, written independently of src/model) to check the engine
// against. Used by synthetic_test.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tq::test {

struct SynthSpec {
  std::string model_type = "llama";
  int64_t vocab = 61, hidden = 32, layers = 2, heads = 4, kv_heads = 2, head_dim = 8, ffn = 24;
  double rope_theta = 10000.0;
  std::string rope_scaling = "null";  // JSON object or null
  int64_t max_position_embeddings = 256;
  bool tie = false;
  bool attention_bias = false;  // llama: biases on q/k/v/o
  int64_t sliding_window = 0;   // mistral / qwen2 (with use_sliding_window)
  int64_t max_window_layers = 0;
  // MoE
  int64_t experts = 0, top_k = 0, moe_ffn = 0, decoder_sparse_step = 1;
  bool norm_topk_prob = true;
  std::vector<int64_t> mlp_only_layers;
  DType dtype = DType::F32;
};

using TensorMap = std::map<std::string, std::vector<float>>;  // values as stored (rounded)

// Writes config.json + model.safetensors into dir; returns the tensors.
TensorMap WriteSyntheticModel(const SynthSpec& spec, const std::string& dir, uint64_t seed);

// Rotary inverse frequencies from the Hugging Face formulas, in double.
struct HandRope {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
};
HandRope HandRopeFrequencies(const SynthSpec& spec);

// Logits [T, vocab] for tokens at positions 0..T-1.
std::vector<double> NaiveForward(const SynthSpec& spec, const TensorMap& w,
                                 const std::vector<int32_t>& tokens);

}  // namespace tq::test
