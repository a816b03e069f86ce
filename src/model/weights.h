// The weights of a decoder, as the forward pass uses them (internal to model/).
#pragma once

#include <memory>
#include <vector>

#include "core/device_buffer.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "model/layer_spec.h"
#include "model/linear.h"
#include "model/param.h"
#include "model/rope.h"

namespace tq {

class Checkpoint;
struct Architecture;
struct ModelConfig;

// Gated MLP: down(act(gate(x)) * up(x)), act from the layer spec (SiLU, GELU-tanh); without a
// gate (nemotron_h's ReLU² MLP): down(relu²(up(x))).
struct GatedMlp {
  std::unique_ptr<Linear> gate, up, down;  // [ffn, hidden], [ffn, hidden], [hidden, ffn]
};

struct MoeBlock {
  std::unique_ptr<Linear> router;  // [num_experts, hidden]
  std::vector<GatedMlp> experts;   // each [moe_ffn, hidden] ...
  int64_t top_k = 0;
  bool renormalize = true;             // divide the top-k probabilities by their sum
  Activation act = Activation::kSilu;  // of the experts (gpt_oss: clamped SwiGLU)
  float routed_scale = 1.0f;           // the routed experts' sum × this (deepseek)
  // The routing rule (kSigmoidGroupTopK: deepseek_v3, routed on the host with these).
  Router router_kind = Router::kSoftmaxTopK;
  int64_t n_group = 1, topk_group = 1;
  std::vector<float> correction_bias;  // [experts], selection only
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
  // Sandwich norms (gemma): on the attention output and the FFN output before the residual adds.
  FloatParam post_attn_norm, post_ffn_norm;  // [hidden]
  // The layer's RoPE table (gemma3: local and global bases) and YaRN's factor on cos/sin.
  FloatParam rope_inv_freq;  // [rotary_dim / 2]
  float rope_attention_factor = 1.0f;
  // Shared expert beside the routed ones (qwen2_moe): shared(h) × sigmoid(h · shared_gate).
  std::unique_ptr<GatedMlp> shared;
  std::unique_ptr<Linear> shared_gate;  // [1, hidden] (null: ungated)
  FloatParam sinks;                     // [heads] per-head sink logits (gpt_oss)
  // Multi-head latent attention (deepseek): q = q_b(norm(q_a(h))) (q_lora_rank 0: q(h));
  // latent c = norm(kv_a_c(h)) [kv_lora]; k_pe = RoPE(kv_a_pe(h)) [rope], one head shared by all;
  // per head [k_nope | v] = kv_b(c). (kv_a_c and kv_a_pe are the row blocks of
  // kv_a_proj_with_mqa.)
  // The forward attends on the latent cache with kv_b absorbed (model/mla_absorb.h): W_UK[h]ᵀ
  // [H, kv_lora, nope] into the query, W_UV[h] [H, v, kv_lora] out of the attention output
  // (kv_b itself stays loaded: tensor roles, byte counts).
  std::unique_ptr<Linear> mla_q_a, mla_q_b, mla_kv_a_c, mla_kv_a_pe, mla_kv_b;
  FloatParam mla_q_a_norm, mla_kv_a_norm;
  FloatParam mla_uk_t, mla_uv;
  // Where the layer's sequence state lives in a KvCache: its index among the attention layers
  // (keys and values) or among the recurrent layers (KvCache::RecurrentState); -1 when none.
  int64_t kv_index = -1, state_index = -1;
  // Gated DeltaNet (qwen3_next: in_proj_qkvz / in_proj_ba, rows grouped per key head; qwen3_5:
  // in_proj_qkv [q | k | v], in_proj_z, in_proj_b, in_proj_a).
  std::unique_ptr<Linear> dn_qkvz, dn_ba, dn_qkv, dn_z, dn_b, dn_a, dn_out;
  FloatParam dn_conv;               // [conv_dim, kernel] depthwise conv weights
  FloatParam dn_a_log, dn_dt_bias;  // [v_heads]
  FloatParam dn_norm;               // [v_dim] the gated RMSNorm's weight (plain w, not 1 + w)
  // Mamba-2 (nemotron_h): in_proj's row blocks z [inner], [x | B | C] [conv_dim], dt [heads].
  std::unique_ptr<Linear> ssm_z, ssm_xbc, ssm_dt, ssm_out;
  FloatParam ssm_conv, ssm_conv_bias;    // [conv_dim, kernel], [conv_dim]
  FloatParam ssm_a, ssm_d, ssm_dt_bias;  // [heads]: A = -exp(A_log), D, dt bias
  FloatParam ssm_norm;                   // [inner] grouped gated RMSNorm weight
  // Gemma 4: v's unweighted RMSNorm (ones [head_dim]), the per-layer input gate [d, hidden] and
  // projection [hidden, d] with their post norm [hidden], and the scalar the layer's output
  // (residual included) is multiplied by.
  FloatParam v_norm;
  std::unique_ptr<Linear> ple_gate, ple_proj;
  FloatParam ple_post_norm;
  float layer_scalar = 1.0f;
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
  // Per-layer input embeddings (gemma4): table [per_layer_vocab, layers * d] (and its copy in the
  // backend's memory), the projection of the embedded input [layers * d, hidden], its norm [d].
  TensorView ple_embed, ple_embed_device;
  DeviceBuffer ple_embed_buf;
  std::unique_ptr<Linear> ple_model_proj;
  FloatParam ple_proj_norm;
  std::vector<LayerWeights> layers;
  RopeFrequencies rope;
  FloatParam rope_inv_freq;  // rope.inv_freq in the backend's memory
  ModelSpec spec;            // the per-layer structure the weights were loaded for
  // Weights rearranged at load (gpt_oss's fused [E, in, out] experts as [out, in] matrices, in
  // the checkpoint's dtype): the linears view these.
  std::vector<std::vector<uint8_t>> owned;
};

std::unique_ptr<ModelWeights> LoadWeights(const Checkpoint& ckpt, const ModelConfig& config,
                                          const Architecture& arch);

// A layer's float parameters (norms, RoPE table, sinks, conv and state-space constants) and
// its mixer's linears (attention, MLA, DeltaNet, Mamba, gemma4's per-layer-input gate and
// projection; not the MLP / MoE ones), the ones set:
// one list for upload and byte counts.
std::vector<FloatParam*> LayerParams(LayerWeights& L);
std::vector<Linear*> LayerMixerLinears(LayerWeights& L);

// Places every weight in the backend's memory (host backends: views of the mmapped checkpoint,
// nothing copied). A tied embedding shares the LM head's copy.
void UploadWeights(ModelWeights& w, kernels::Backend& be);

}  // namespace tq
