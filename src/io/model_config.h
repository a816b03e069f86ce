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
  enum class Type { kNone, kLinear, kLlama3, kYarn, kDynamic } type = Type::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;
  std::optional<double> mscale, mscale_all_dim, attention_factor;
  bool truncate = true;
};

struct ModelConfig {
  std::string model_type;    // "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral"
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
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // qwen2: true (q/k/v biases)
  bool mlp_bias = false;
  bool qk_norm = false;  // qwen3 / qwen3_moe: RMSNorm on q and k per head
  // Sliding window attention (mistral, qwen2 with use_sliding_window). 0 = none.
  int64_t sliding_window = 0;
  int64_t max_window_layers = 0;  // qwen2: layers >= this use the sliding window
  // qwen2/qwen3/qwen3_moe explicit "layer_types" ("full_attention"/"sliding_attention"), one per
  // layer; empty when the file has none (then max_window_layers decides).
  std::vector<std::string> layer_types;
  // MoE (qwen3_moe: num_experts, mixtral: num_local_experts).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  // Renormalize the top-k router weights (mixtral: always; qwen3_moe: key, default false).
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  int64_t shared_expert_intermediate_size = 0;
  // Token ids (config.json; generation_config.json may override eos).
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;  // "bfloat16", ...
  std::string raw_json;     // the file as read (for the converter to copy and extend)

  bool is_moe() const { return num_experts > 0; }
  // True when layer `l` uses an MoE block: not in mlp_only_layers, num_experts > 0 and
  // (l + 1) % decoder_sparse_step == 0 (mixtral: every layer).
  bool LayerIsMoe(int64_t l) const;
  // True when layer `l` uses sliding-window attention (sliding_window > 0 and: mistral/mixtral
  // every layer; qwen* layer_types[l] when given, else l >= max_window_layers).
  bool LayerIsSliding(int64_t l) const;
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

// Parses config.json text; `where` names the file in errors ("config <path>"). Unknown
// model_type -> tq::Error listing the supported ones; missing or mistyped fields, sizes out of
// [1, 2^31), heads not divisible by kv heads, bad rope or MoE settings -> tq::Error naming the
// field. Absent optional keys take the defaults of the HF config class of that model type.
ModelConfig ParseModelConfig(const std::string& json_text, const std::string& where);
ModelConfig LoadModelConfig(const std::string& model_dir);  // <dir>/config.json
GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& where);
// <dir>/generation_config.json; an absent file gives an empty config.
GenerationConfig LoadGenerationConfig(const std::string& model_dir);

}  // namespace tq
