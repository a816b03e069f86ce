// config.json and generation_config.json as plain data (no behaviour). Which architectures exist
// and how their tensors are named is model/'s business; this only reads what the files say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tq {

// rope_scaling (classic configs) or rope_parameters (transformers >= 5); kNone = "default".
// original_max_position_embeddings falls back to max_position_embeddings when absent.
struct RopeScaling {
  // kProportional (gemma4 global layers): the default frequencies of the whole head_dim, rotating
  // only the first partial_rotary_factor of it.
  enum class Type { kNone, kLinear, kLlama3, kYarn, kDynamic, kProportional } type = Type::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;
  std::optional<double> mscale, mscale_all_dim, attention_factor;
  bool truncate = true;
};

// One RoPE table: base, scaling and the rotated fraction of head_dim (phi3, qwen3-next: 0.25 etc).
struct RopeParams {
  double theta = 10000.0;
  RopeScaling scaling;
  double partial_rotary_factor = 1.0;  // (0, 1]
};

// Multi-head latent attention (deepseek_v2 / deepseek_v3). Active when kv_lora_rank > 0.
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: q_proj is one full-rank matrix
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;  // rotary pairs are (2i, 2i+1), as deepseek's complex rotation
};

// Gated DeltaNet linear attention (qwen3_next, qwen3_5*). Active when num_key_heads > 0.
struct DeltaNetConfig {
  int64_t num_key_heads = 0, num_value_heads = 0;  // value heads are a multiple of key heads
  int64_t key_head_dim = 0, value_head_dim = 0;
  int64_t conv_kernel = 4;  // causal depthwise conv1d over [q | k | v]
};

// Mamba-2 mixer (nemotron_h). Active when num_heads > 0.
struct Mamba2Config {
  int64_t num_heads = 0, head_dim = 0;  // inner size = num_heads * head_dim
  int64_t state_size = 0;               // N (ssm_state_size)
  int64_t n_groups = 1;                 // B and C are shared by num_heads / n_groups heads
  int64_t conv_kernel = 4;              // over [x | B | C]
  int64_t chunk_size = 256;             // SSD chunk length (prefill)
  bool conv_bias = true, proj_bias = false;
  double time_step_min_clamp = 0.0, time_step_max_clamp = 1e30;  // time_step_limit
  double norm_eps = 1e-5;  // gated RMSNorm (layer_norm_epsilon)
};

struct ModelConfig {
  // "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gemma2", "gemma3_text",
  // "gemma4_text", "phi3", "qwen2_moe", "gpt_oss", "qwen3_next", "qwen3_5_text",
  // "qwen3_5_moe_text", "nemotron_h", "deepseek_v2", "deepseek_v3".
  std::string model_type;
  // Multimodal wrappers (gemma3, qwen3_5, ...): the outer model_type, the text model being read
  // from its text_config; its weights live under model.language_model.
  std::string wrapper_model_type;
  std::string architecture;  // architectures[0], e.g. "LlamaForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;    // num_hidden_layers
  int64_t num_heads = 0;     // num_attention_heads
  int64_t num_kv_heads = 0;  // num_key_value_heads (defaults to num_heads)
  int64_t head_dim = 0;      // defaults to hidden_size / num_heads (qwen3: 128, as HF)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;  // top-level or rope_parameters.rope_theta
  RopeScaling rope_scaling;
  std::string hidden_act = "silu";  // hidden_act / hidden_activation / mlp_hidden_act
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // qwen2: true (q/k/v biases)
  bool mlp_bias = false;
  bool qk_norm = false;  // qwen3 / qwen3_moe: RMSNorm on q and k per head
  // Sliding window attention (mistral, qwen2 with use_sliding_window). 0 = none.
  int64_t sliding_window = 0;
  int64_t max_window_layers = 0;  // qwen2: layers >= this use the sliding window
  // qwen2/qwen3/qwen3_moe explicit "layer_types" ("full_attention"/"sliding_attention"), one per
  // layer; empty when the file has none (then max_window_layers decides).
  // gemma2/3/4, gpt_oss: always filled (defaults: their alternating patterns). qwen3_next /
  // qwen3_5: "linear_attention" / "full_attention". nemotron_h: "mamba", "full_attention",
  // "mlp", "moe" (layers_block_type or hybrid_override_pattern M * - E).
  std::vector<std::string> layer_types;
  // Sliding-window layers keep their own RoPE table (gemma3/4 local base); unset: same as full.
  std::optional<RopeParams> sliding_rope;
  double partial_rotary_factor = 1.0;  // of the full-attention RoPE table
  // Per-layer head_dim overrides (gemma4 per_layer_config), one per layer, 0 = head_dim.
  std::vector<int64_t> layer_head_dim;
  // Attention variants.
  std::optional<double> query_pre_attn_scalar;  // gemma: scale = query_pre_attn_scalar^-0.5
  double attn_logit_softcap = 0;                // gemma2: tanh soft-cap of q·k (0 = none)
  double final_logit_softcap = 0;               // gemma2/4: of the logits (0 = none)
  // gemma4_text: per-layer input embeddings and shared KV / k = v attention.
  int64_t hidden_size_per_layer_input = 0, vocab_size_per_layer_input = 0;
  int64_t num_kv_shared_layers = 0;
  bool attention_k_eq_v = false;
  MlaConfig mla;
  DeltaNetConfig delta_net;
  Mamba2Config mamba;
  // MoE (qwen3_moe: num_experts, mixtral: num_local_experts).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  // Renormalize the top-k router weights (mixtral: always; qwen3_moe: key, default false).
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  int64_t shared_expert_intermediate_size = 0;  // qwen2_moe / qwen3_next: one sigmoid-gated
  int64_t n_shared_experts = 0;                 // deepseek: n × moe_intermediate_size, ungated
  int64_t first_k_dense_replace = 0;            // deepseek: layers < this are dense
  int64_t moe_layer_freq = 1;                   // deepseek: MoE where l % freq == 0 (past k)
  double routed_scaling_factor = 1.0;           // deepseek: routed output × this
  // Router: "softmax" (softmax over all experts, then top-k), "softmax_topk" (top-k logits, then
  // softmax over them: gpt_oss, mixtral), "sigmoid" (deepseek_v3: sigmoid + correction bias,
  // group-limited top-k over n_group groups keeping topk_group).
  std::string scoring_func = "softmax";
  int64_t n_group = 1, topk_group = 1;
  bool moe_by_layer_type = false;  // nemotron_h: layer_types[l] == "moe" picks the MoE layers
  // Token ids (config.json; generation_config.json may override eos).
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;  // "bfloat16", ...
  std::string raw_json;     // the file as read (for the converter to copy and extend)

  // Every layer slides when sliding_window > 0 (mistral, mixtral); else layer_types decide, then
  // max_window_layers (qwen2*).
  bool sliding_all_layers = false;

  bool is_moe() const { return num_experts > 0; }
  // True when layer `l` uses an MoE block: nemotron_h: layer_types[l] == "moe"; deepseek:
  // l >= first_k_dense_replace and l % moe_layer_freq == 0; others: not in mlp_only_layers and
  // (l + 1) % decoder_sparse_step == 0 (mixtral: every layer).
  bool LayerIsMoe(int64_t l) const;
  // True when layer `l` uses sliding-window attention (sliding_window > 0 and: mistral/mixtral
  // every layer; layer_types[l] == "sliding_attention" when given, else l >= max_window_layers).
  bool LayerIsSliding(int64_t l) const;
  // layer_types[l] when given, else "full_attention".
  const std::string& LayerType(int64_t l) const;
};

struct GenerationConfig {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_new_tokens;
  std::optional<bool> do_sample;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id, pad_token_id;
};

// The supported model_type values, for error messages and doctor.
const std::vector<std::string>& SupportedModelTypes();

// Parses config.json text; `where` names the file in errors ("config <path>"). A multimodal
// wrapper with a text_config object parses as its text model (wrapper_model_type set). Unknown
// model_type -> tq::Error listing the supported ones; missing or mistyped fields, sizes out of
// [1, 2^31), heads not divisible by kv heads, bad rope or MoE settings -> tq::Error naming the
// field. Absent optional keys take the defaults of the HF config class of that model type.
ModelConfig ParseModelConfig(const std::string& json_text, const std::string& where);
ModelConfig LoadModelConfig(const std::string& model_dir);  // <dir>/config.json
GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& where);
// <dir>/generation_config.json; an absent file gives an empty config.
GenerationConfig LoadGenerationConfig(const std::string& model_dir);

}  // namespace tq
