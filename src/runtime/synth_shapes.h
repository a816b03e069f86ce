// The shapes `turboquant synth` reproduces: the config.json values of real hub checkpoints (and a
// few tiny test shapes, marked as such), the tensors each architecture stores, and how each
// tensor is initialised. Plain data so tests can check them without writing gigabytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/tensor_roles.h"

namespace tq {

enum class SynthTokenizerStyle {
  kLlama3,   // <|begin_of_text|> BOS added, <|eot_id|> chat markers, specials after the BPE vocab
  kQwen,     // ChatML <|im_start|>/<|im_end|>, no BOS, specials after the BPE vocab
  kMistral,  // <unk>=0, <s>=1 (BOS added), </s>=2, [INST] chat
};

struct SynthShape {
  std::string name;        // "llama-3.2-1b"
  bool test_only = false;  // tiny shapes for unit tests, not real models
  std::string model_type, architecture;
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t vocab = 0, max_position_embeddings = 0;
  double rope_theta = 10000.0, rms_norm_eps = 1e-5;
  double llama3_rope_factor = 0.0;  // > 0: llama3 rope scaling (original context 8192)
  bool tie_embeddings = false, qkv_bias = false, qk_norm = false;
  int64_t experts = 0, experts_per_tok = 0, moe_intermediate = 0;
  SynthTokenizerStyle tokenizer = SynthTokenizerStyle::kLlama3;
  // Set for the families synth builds from their layer spec: the whole config.json (the fields
  // above give only name, vocab and tokenizer); SynthConfigJson keeps the first `layers` layers
  // and SynthTensors walks ExpectedTensors (model/tensor_roles.h) of it.
  nlohmann::json config;
};

const std::vector<SynthShape>& SynthShapes();
// Throws tq::UsageError listing the known names.
const SynthShape& FindSynthShape(const std::string& name);

// config.json for `shape` with `layers` decoder layers (0 = all).
nlohmann::json SynthConfigJson(const SynthShape& shape, int64_t layers);

struct SynthTensor {
  std::string name;
  Shape shape;
  float stddev = 0.0f;  // normal(0, stddev); 0 with `ones` false means zeros
  bool ones = false;    // norm weights
};
// Every tensor of the checkpoint in file order (embeddings, layers, final norm, lm_head). A
// spec-built family with fused experts (gpt_oss) writes them as published, or one linear per
// expert with `layout` kPerExpert (what convert writes: synth --bits packs them).
std::vector<SynthTensor> SynthTensors(const SynthShape& shape, int64_t layers,
                                      ExpertLayout layout = ExpertLayout::kPublished);

}  // namespace tq
