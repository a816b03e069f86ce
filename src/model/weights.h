// The weights of a decoder, as the forward pass uses them (internal to model/).
#pragma once

#include <memory>
#include <vector>

#include "core/device_buffer.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "model/linear.h"
#include "model/param.h"
#include "model/rope.h"

namespace tq {

class Checkpoint;
struct Architecture;
struct ModelConfig;

// SiLU-gated MLP: down(silu(gate(x)) * up(x)).
struct GatedMlp {
  std::unique_ptr<Linear> gate, up, down;  // [ffn, hidden], [ffn, hidden], [hidden, ffn]
};

struct MoeBlock {
  std::unique_ptr<Linear> router;  // [num_experts, hidden]
  std::vector<GatedMlp> experts;   // each [moe_ffn, hidden] ...
  int64_t top_k = 0;
  bool renormalize = true;  // divide the top-k probabilities by their sum
  // Experts served by the model's ExpertCache (model/expert_cache.h): `experts` are then the
  // templates (shapes, codebooks, rotations) and only their resident parts are uploaded.
  bool streamed = false;
};

struct LayerWeights {
  FloatParam attn_norm, ffn_norm;      // [hidden]
  std::unique_ptr<Linear> q, k, v, o;  // [heads*hd, hidden], [kv*hd, hidden] x2, [hidden, heads*hd]
  FloatParam q_norm, k_norm;           // [head_dim] when the architecture has qk-norm
  std::unique_ptr<GatedMlp> mlp;       // dense layers
  std::unique_ptr<MoeBlock> moe;       // MoE layers
  int64_t window = 0;                  // sliding window (0 = full attention)
};

class PackedLinear;

struct ModelWeights {
  ModelWeights();
  ~ModelWeights();
  TensorView embed;         // [vocab, hidden] (unset when packed)
  TensorView embed_device;  // embed in the backend's memory (after upload)
  DeviceBuffer embed_buf;
  std::unique_ptr<PackedLinear> embed_packed;  // TurboQuant checkpoints with --embed-bits < 16
  std::unique_ptr<Linear> lm_head;             // [vocab, hidden] (the embedding when tied)
  bool lm_head_tied = false;
  FloatParam final_norm;  // [hidden]
  std::vector<LayerWeights> layers;
  RopeFrequencies rope;
  FloatParam rope_inv_freq;  // rope.inv_freq in the backend's memory
};

std::unique_ptr<ModelWeights> LoadWeights(const Checkpoint& ckpt, const ModelConfig& config,
                                          const Architecture& arch);

// Places every weight in the backend's memory (host backends: views of the mmapped checkpoint,
// nothing copied). A tied embedding shares the LM head's copy.
void UploadWeights(ModelWeights& w, kernels::Backend& be);

}  // namespace tq
