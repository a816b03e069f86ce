// An architecture is what distinguishes one decoder family from the generic one in forward.cc:
// tensor names and a few flags. Each lives in its own arch_<name>.cc (a dozen lines) and has a
// line in the registry in architecture.cc. The per-layer structure built from it and config.json
// is model/layer_spec.h: everything else (weights, tensor roles, plan, synth) reads that.
#pragma once

#include <string>
#include <vector>

namespace tq {

// Tensor names. "{L}" stands for the layer index, "{E}" for the expert index. Linear names are
// module prefixes: ".weight" and ".bias" are appended.
struct ArchTensorNames {
  std::string embed = "model.embed_tokens.weight";
  std::string final_norm = "model.norm.weight";
  std::string lm_head = "lm_head";
  std::string attn_norm = "model.layers.{L}.input_layernorm.weight";
  std::string ffn_norm = "model.layers.{L}.post_attention_layernorm.weight";
  std::string q = "model.layers.{L}.self_attn.q_proj";
  std::string k = "model.layers.{L}.self_attn.k_proj";
  std::string v = "model.layers.{L}.self_attn.v_proj";
  std::string o = "model.layers.{L}.self_attn.o_proj";
  std::string q_norm = "model.layers.{L}.self_attn.q_norm.weight";
  std::string k_norm = "model.layers.{L}.self_attn.k_norm.weight";
  std::string gate = "model.layers.{L}.mlp.gate_proj";  // dense SiLU-gated MLP
  std::string up = "model.layers.{L}.mlp.up_proj";
  std::string down = "model.layers.{L}.mlp.down_proj";
  std::string router = "model.layers.{L}.mlp.gate";  // MoE: [num_experts, hidden]
  std::string expert_gate = "model.layers.{L}.mlp.experts.{E}.gate_proj";
  std::string expert_up = "model.layers.{L}.mlp.experts.{E}.up_proj";
  std::string expert_down = "model.layers.{L}.mlp.experts.{E}.down_proj";

  // Sandwich norms (gemma): after attention and around the feed-forward block.
  std::string post_attn_norm = "model.layers.{L}.post_attention_layernorm.weight";
  std::string post_ffn_norm = "model.layers.{L}.post_feedforward_layernorm.weight";
  // Fused projections (phi3): [q; k; v] rows and [gate; up] rows.
  std::string qkv = "model.layers.{L}.self_attn.qkv_proj";
  std::string gate_up = "model.layers.{L}.mlp.gate_up_proj";
  std::string sinks = "model.layers.{L}.self_attn.sinks";  // [heads] (gpt_oss)
  // Shared experts (qwen2_moe, qwen3_next: one, sigmoid-gated; deepseek: n, ungated).
  std::string shared_gate = "model.layers.{L}.mlp.shared_expert.gate_proj";
  std::string shared_up = "model.layers.{L}.mlp.shared_expert.up_proj";
  std::string shared_down = "model.layers.{L}.mlp.shared_expert.down_proj";
  std::string shared_expert_gate = "model.layers.{L}.mlp.shared_expert_gate";  // [1, hidden]
  std::string router_correction_bias = "model.layers.{L}.mlp.gate.e_score_correction_bias";
  // Experts stored as one tensor per projection (gpt_oss): [E, hidden, 2*ffn] with gate and up
  // interleaved along the last axis, [E, ffn, hidden]; "<name>_bias" [E, 2*ffn], [E, hidden].
  std::string experts_gate_up = "model.layers.{L}.mlp.experts.gate_up_proj";
  std::string experts_down = "model.layers.{L}.mlp.experts.down_proj";
  // Multi-head latent attention (deepseek).
  std::string mla_q_a = "model.layers.{L}.self_attn.q_a_proj";
  std::string mla_q_a_norm = "model.layers.{L}.self_attn.q_a_layernorm.weight";
  std::string mla_q_b = "model.layers.{L}.self_attn.q_b_proj";
  std::string mla_kv_a = "model.layers.{L}.self_attn.kv_a_proj_with_mqa";
  std::string mla_kv_a_norm = "model.layers.{L}.self_attn.kv_a_layernorm.weight";
  std::string mla_kv_b = "model.layers.{L}.self_attn.kv_b_proj";
  // Gated DeltaNet (qwen3_next: qkvz + ba fused per key-head group; qwen3_5: four projections).
  std::string dn_qkvz = "model.layers.{L}.linear_attn.in_proj_qkvz";
  std::string dn_ba = "model.layers.{L}.linear_attn.in_proj_ba";
  std::string dn_qkv = "model.layers.{L}.linear_attn.in_proj_qkv";
  std::string dn_z = "model.layers.{L}.linear_attn.in_proj_z";
  std::string dn_b = "model.layers.{L}.linear_attn.in_proj_b";
  std::string dn_a = "model.layers.{L}.linear_attn.in_proj_a";
  std::string dn_conv = "model.layers.{L}.linear_attn.conv1d";  // .weight [C, 1, K] (+ .bias)
  std::string dn_a_log = "model.layers.{L}.linear_attn.A_log";
  std::string dn_dt_bias = "model.layers.{L}.linear_attn.dt_bias";
  std::string dn_norm = "model.layers.{L}.linear_attn.norm.weight";
  std::string dn_out = "model.layers.{L}.linear_attn.out_proj";
  // Mamba-2 (nemotron_h mixer).
  std::string ssm_in = "model.layers.{L}.mixer.in_proj";
  std::string ssm_conv = "model.layers.{L}.mixer.conv1d";
  std::string ssm_a_log = "model.layers.{L}.mixer.A_log";
  std::string ssm_d = "model.layers.{L}.mixer.D";
  std::string ssm_dt_bias = "model.layers.{L}.mixer.dt_bias";
  std::string ssm_norm = "model.layers.{L}.mixer.norm.weight";
  std::string ssm_out = "model.layers.{L}.mixer.out_proj";
  // Per-layer input embeddings (gemma4).
  std::string ple_embed = "model.embed_tokens_per_layer.weight";         // [vocab, L * d]
  std::string ple_model_proj = "model.per_layer_model_projection";       // [L * d, hidden]
  std::string ple_proj_norm = "model.per_layer_projection_norm.weight";  // [d]
  std::string ple_gate = "model.layers.{L}.per_layer_input_gate";        // [d, hidden]
  std::string ple_proj = "model.layers.{L}.per_layer_projection";        // [hidden, d]
  std::string ple_post_norm = "model.layers.{L}.post_per_layer_input_norm.weight";
  std::string layer_scalar = "model.layers.{L}.layer_scalar";  // [1]
};

struct ModelConfig;

struct Architecture {
  std::string model_type;  // config.json "model_type"
  ArchTensorNames names;
  bool qkv_bias = false;                // q/k/v carry biases whatever the config says (qwen2)
  bool o_bias_follows_config = true;    // o_proj has a bias when config.attention_bias (llama)
  bool qk_norm = false;                 // per-head RMSNorm on q and k before RoPE (qwen3)
  bool sliding_window = false;          // honours config.sliding_window on the layers it names
  bool moe = false;                     // MoE blocks on the layers config.LayerIsMoe() names
  bool moe_always_renormalize = false;  // top-k router weights renormalised (mixtral)
  bool expert_ffn_is_intermediate_size = false;  // mixtral: no moe_intermediate_size key

  // False for families whose layer spec and tensor names are known but which forward.cc does
  // not run yet: FindArchitecture refuses them with a clear error, FindFamily returns them.
  bool runnable = true;
  bool norm_plus_one = false;            // RMSNorm scales by (1 + w) (gemma, qwen3_next, qwen3_5)
  bool embed_scale_sqrt_hidden = false;  // embeddings × sqrt(hidden) (gemma)
  bool sandwich_norm = false;            // post-attention and post-feedforward norms (gemma)
  bool attn_sinks = false;               // a learned per-head sink logit in the softmax (gpt_oss)
  bool attn_output_gate = false;         // q_proj emits [q | gate] per head; out × sigmoid(gate)
  bool attn_scale_one = false;           // q·k is not scaled (gemma4: q/k norms fix the scale)
  bool v_norm = false;                   // unweighted RMSNorm on v per head (gemma4)
  bool fused_qkv = false;                // one qkv_proj (phi3)
  bool fused_gate_up = false;            // one gate_up_proj (phi3)
  bool shared_expert_gate = false;  // shared expert × sigmoid(x · w_gate) (qwen2_moe, qwen3_next)
  bool router_bias = false;         // router linear has a bias (gpt_oss)
  bool fused_experts = false;       // experts as [E, ...] tensors with biases (gpt_oss)
  bool dn_fused_in_proj = false;    // DeltaNet in_proj_qkvz / in_proj_ba (qwen3_next)
  bool per_layer_inputs = false;    // gemma4 per-layer input embeddings + layer_scalar
  bool attn_rope = true;            // false: attention without positions (nemotron_h)
  // FFN activation when it is not config.hidden_act ("gpt_oss_swiglu": clamped SwiGLU).
  std::string activation;
};

// The runnable architecture for a config.json model_type; throws listing the supported ones
// (and saying so when the family is known but not runnable yet).
const Architecture& FindArchitecture(const std::string& model_type);
// The same for a parsed config: a multimodal wrapper's (config.wrapper_model_type set) tensor
// names are its text model's under model.language_model. (lm_head stays at the top level).
const Architecture& FindArchitecture(const ModelConfig& config);
// Any registered family, runnable or not (layer specs, tensor names, synth); throws when unknown.
const Architecture& FindFamily(const std::string& model_type);
std::vector<std::string> ArchitectureNames();  // the runnable ones
std::vector<std::string> FamilyNames();        // all registered

// Expands "{L}" and "{E}" in a name pattern.
std::string TensorName(const std::string& pattern, int64_t layer, int64_t expert = -1);

}  // namespace tq
