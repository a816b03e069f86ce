// An architecture is what distinguishes one decoder family from the generic one in forward.cc:
// tensor names and a few flags. Each lives in its own arch_<name>.cc (a dozen lines) and has a
// line in the registry in architecture.cc.
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
};

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
};

// The architecture for a config.json model_type; throws listing the supported ones.
const Architecture& FindArchitecture(const std::string& model_type);
std::vector<std::string> ArchitectureNames();

// Expands "{L}" and "{E}" in a name pattern.
std::string TensorName(const std::string& pattern, int64_t layer, int64_t expert = -1);

}  // namespace tq
