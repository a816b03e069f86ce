#include "runtime/synth_shapes.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "io/model_config.h"
#include "model/tensor_roles.h"

namespace tq {
namespace {

SynthShape Llama(std::string name, int64_t hidden, int64_t inter, int64_t layers, int64_t heads,
                 int64_t head_dim, double rope_factor, bool tie) {
  SynthShape s;
  s.name = std::move(name);
  s.model_type = "llama";
  s.architecture = "LlamaForCausalLM";
  s.hidden = hidden;
  s.intermediate = inter;
  s.layers = layers;
  s.heads = heads;
  s.kv_heads = 8;
  s.head_dim = head_dim;
  s.vocab = 128256;
  s.max_position_embeddings = 131072;
  s.rope_theta = 500000.0;
  s.rms_norm_eps = 1e-5;
  s.llama3_rope_factor = rope_factor;
  s.tie_embeddings = tie;
  s.tokenizer = SynthTokenizerStyle::kLlama3;
  return s;
}

SynthShape Qwen(std::string name, std::string model_type, std::string arch, int64_t hidden,
                int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads, int64_t vocab,
                int64_t max_pos) {
  SynthShape s;
  s.name = std::move(name);
  s.model_type = std::move(model_type);
  s.architecture = std::move(arch);
  s.hidden = hidden;
  s.intermediate = inter;
  s.layers = layers;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = 128;
  s.vocab = vocab;
  s.max_position_embeddings = max_pos;
  s.rope_theta = 1000000.0;
  s.rms_norm_eps = 1e-6;
  s.tokenizer = SynthTokenizerStyle::kQwen;
  return s;
}

// qwen3_5_text (dense Gated DeltaNet hybrid) of the given size, built from its layer spec.
// layer_types of `layers` Qwen3.5 / 3.6 hybrid layers: three Gated DeltaNet layers, then one
// full attention layer, repeated.
nlohmann::json DeltaNetPattern(int64_t layers) {
  nlohmann::json t = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l)
    t.push_back(l % 4 == 3 ? "full_attention" : "linear_attention");
  return t;
}

SynthShape Qwen35Hybrid(std::string name, int64_t hidden, int64_t inter, int64_t layers,
                        int64_t vocab, bool test_only) {
  SynthShape s = Qwen(std::move(name), "qwen3_5_text", "Qwen3_5ForCausalLM", hidden, inter, layers,
                      8, 2, vocab, 32768);
  s.test_only = test_only;
  const nlohmann::json types = DeltaNetPattern(layers);
  s.config = {{"architectures", {s.architecture}},
              {"model_type", s.model_type},
              {"vocab_size", vocab},
              {"hidden_size", hidden},
              {"intermediate_size", inter},
              {"num_hidden_layers", layers},
              {"layer_types", types},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 2},
              {"head_dim", 128},
              {"hidden_act", "silu"},
              {"linear_conv_kernel_dim", 4},
              {"linear_key_head_dim", 128},
              {"linear_value_head_dim", 128},
              {"linear_num_key_heads", 8},
              {"linear_num_value_heads", 16},
              {"max_position_embeddings", 32768},
              {"rms_norm_eps", 1e-6},
              {"rope_parameters",
               {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}},
              {"tie_word_embeddings", false},
              {"bos_token_id", vocab - 256},
              {"eos_token_id", vocab - 256},
              {"torch_dtype", "bfloat16"}};
  return s;
}

// A family synth builds from its layer spec, from the hub config's values (`config`: every
// field the parser reads; layer_types given whole). Tokenizer: Mistral-style specials (bos 1,
// eos 2), which these configs name.
SynthShape FromConfig(std::string name, nlohmann::json config) {
  config["bos_token_id"] = 1;
  config["eos_token_id"] = 2;
  config["torch_dtype"] = "bfloat16";
  const ModelConfig c = ParseModelConfig(config.dump(), "synth " + name);  // the summary fields
  SynthShape s;
  s.name = std::move(name);
  s.model_type = c.model_type;
  s.architecture = config.at("architectures").at(0).get<std::string>();
  s.hidden = c.hidden_size;
  s.intermediate = c.intermediate_size;
  s.layers = c.num_layers;
  s.heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.vocab = c.vocab_size;
  s.max_position_embeddings = c.max_position_embeddings;
  s.tie_embeddings = c.tie_word_embeddings;
  s.qkv_bias = c.attention_bias;
  s.experts = c.num_experts;
  s.experts_per_tok = c.num_experts_per_tok;
  s.moe_intermediate = c.moe_intermediate_size;
  s.tokenizer = SynthTokenizerStyle::kMistral;
  s.config = std::move(config);
  return s;
}

// layer_types of `layers` layers: `period - 1` sliding layers, then one full one, repeated.
nlohmann::json SlidingPattern(int64_t layers, int64_t period) {
  nlohmann::json t = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l)
    t.push_back(l % period == period - 1 ? "full_attention" : "sliding_attention");
  return t;
}

// openai/gpt-oss-*: hidden 2880, 64 query / 8 KV heads of 64 with biases and sinks, layers
// alternating sliding (128) and full attention, experts of 2880 (top 4), YaRN RoPE; the two
// published sizes differ in layers and experts.
SynthShape GptOss(std::string name, int64_t layers, int64_t experts) {
  return FromConfig(std::move(name), {{"architectures", {"GptOssForCausalLM"}},
                                      {"model_type", "gpt_oss"},
                                      {"vocab_size", 201088},
                                      {"hidden_size", 2880},
                                      {"intermediate_size", 2880},
                                      {"num_hidden_layers", layers},
                                      {"num_attention_heads", 64},
                                      {"num_key_value_heads", 8},
                                      {"head_dim", 64},
                                      {"num_local_experts", experts},
                                      {"num_experts_per_tok", 4},
                                      {"sliding_window", 128},
                                      {"layer_types", SlidingPattern(layers, 2)},
                                      {"hidden_act", "silu"},
                                      {"swiglu_limit", 7.0},
                                      {"attention_bias", true},
                                      {"max_position_embeddings", 131072},
                                      {"rms_norm_eps", 1e-5},
                                      {"rope_parameters",
                                       {{"rope_type", "yarn"},
                                        {"rope_theta", 150000.0},
                                        {"factor", 32.0},
                                        {"original_max_position_embeddings", 4096},
                                        {"beta_fast", 32.0},
                                        {"beta_slow", 1.0},
                                        {"truncate", false}}},
                                      {"tie_word_embeddings", false}});
}

std::vector<SynthShape> MakeShapes() {
  std::vector<SynthShape> v;
  // meta-llama/Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B.
  v.push_back(Llama("llama-3.2-1b", 2048, 8192, 16, 32, 64, 32.0, true));
  v.push_back(Llama("llama-3.2-3b", 3072, 8192, 28, 24, 128, 32.0, true));
  v.push_back(Llama("llama-3.1-8b", 4096, 14336, 32, 32, 128, 8.0, false));
  // Qwen/Qwen2.5-7B: q/k/v biases.
  auto q25 = Qwen("qwen2.5-7b", "qwen2", "Qwen2ForCausalLM", 3584, 18944, 28, 28, 4, 152064, 32768);
  q25.qkv_bias = true;
  v.push_back(q25);
  // Qwen/Qwen3-8B: q/k RMSNorm.
  auto q3 = Qwen("qwen3-8b", "qwen3", "Qwen3ForCausalLM", 4096, 12288, 36, 32, 8, 151936, 40960);
  q3.qk_norm = true;
  v.push_back(q3);
  // Qwen/Qwen3-30B-A3B: 128 experts, top-8, expert FFN 768.
  auto moe = Qwen("qwen3-30b-a3b", "qwen3_moe", "Qwen3MoeForCausalLM", 2048, 6144, 48, 32, 4,
                  151936, 40960);
  moe.qk_norm = true;
  moe.experts = 128;
  moe.experts_per_tok = 8;
  moe.moe_intermediate = 768;
  v.push_back(moe);
  // mistralai/Mistral-7B-Instruct-v0.2 (7.24B; the shape of the llama.cpp GPU anchors):
  // Llama's layers with 32 heads / 8 KV heads, vocab 32000, rope theta 1e6, no sliding window.
  SynthShape m7;
  m7.name = "mistral-7b";
  m7.model_type = "mistral";
  m7.architecture = "MistralForCausalLM";
  m7.hidden = 4096;
  m7.intermediate = 14336;
  m7.layers = 32;
  m7.heads = 32;
  m7.kv_heads = 8;
  m7.head_dim = 128;
  m7.vocab = 32000;
  m7.max_position_embeddings = 32768;
  m7.rope_theta = 1000000.0;
  m7.rms_norm_eps = 1e-5;
  m7.tokenizer = SynthTokenizerStyle::kMistral;
  v.push_back(m7);
  // mistralai/Mixtral-8x7B-v0.1: 8 experts, top-2.
  SynthShape mx;
  mx.name = "mixtral-8x7b";
  mx.model_type = "mixtral";
  mx.architecture = "MixtralForCausalLM";
  mx.hidden = 4096;
  mx.intermediate = 14336;
  mx.layers = 32;
  mx.heads = 32;
  mx.kv_heads = 8;
  mx.head_dim = 128;
  mx.vocab = 32000;
  mx.max_position_embeddings = 32768;
  mx.rope_theta = 1000000.0;
  mx.rms_norm_eps = 1e-5;
  mx.experts = 8;
  mx.experts_per_tok = 2;
  mx.tokenizer = SynthTokenizerStyle::kMistral;
  v.push_back(mx);

  // google/gemma-3-27b-it's text model: 62 layers, five sliding (1,024) to one global, GeLU-tanh,
  // q/k norms, query scale 1 / sqrt(168), tied 262,208-token embedding.
  v.push_back(FromConfig(
      "gemma-3-27b",
      {{"architectures", {"Gemma3ForCausalLM"}},
       {"model_type", "gemma3_text"},
       {"vocab_size", 262208},
       {"hidden_size", 5376},
       {"intermediate_size", 21504},
       {"num_hidden_layers", 62},
       {"num_attention_heads", 32},
       {"num_key_value_heads", 16},
       {"head_dim", 128},
       {"hidden_activation", "gelu_pytorch_tanh"},
       {"query_pre_attn_scalar", 168},
       {"sliding_window", 1024},
       {"layer_types", SlidingPattern(62, 6)},
       {"_sliding_window_pattern", 6},
       {"attn_logit_softcapping", nullptr},
       {"final_logit_softcapping", nullptr},
       {"max_position_embeddings", 131072},
       {"rms_norm_eps", 1e-6},
       {"rope_parameters",
        {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
         {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}},
       {"attention_bias", false},
       {"tie_word_embeddings", true}}));
  // openai/gpt-oss-20b: 24 layers alternating sliding (128) and full attention with sinks, 32
  // experts (top 4) in fused [E, ...] tensors with biases, clamped SwiGLU, YaRN RoPE.
  v.push_back(GptOss("gpt-oss-20b", 24, 32));
  // openai/gpt-oss-120b: the same layers, 36 of them, 128 experts (its config.json differs from
  // the 20b's in num_hidden_layers, num_local_experts and layer_types alone).
  v.push_back(GptOss("gpt-oss-120b", 36, 128));
  // deepseek-ai/DeepSeek-V2-Lite: multi-head latent attention (KV rank 512, no query low rank),
  // 64 routed experts (top 6) + 2 shared from layer 1, YaRN RoPE.
  v.push_back(FromConfig("deepseek-v2-lite", {{"architectures", {"DeepseekV2ForCausalLM"}},
                                              {"model_type", "deepseek_v2"},
                                              {"vocab_size", 102400},
                                              {"hidden_size", 2048},
                                              {"intermediate_size", 10944},
                                              {"moe_intermediate_size", 1408},
                                              {"num_hidden_layers", 27},
                                              {"num_attention_heads", 16},
                                              {"num_key_value_heads", 16},
                                              {"n_routed_experts", 64},
                                              {"n_shared_experts", 2},
                                              {"num_experts_per_tok", 6},
                                              {"first_k_dense_replace", 1},
                                              {"n_group", 1},
                                              {"topk_group", 1},
                                              {"topk_method", "greedy"},
                                              {"norm_topk_prob", false},
                                              {"routed_scaling_factor", 1.0},
                                              {"kv_lora_rank", 512},
                                              {"q_lora_rank", nullptr},
                                              {"qk_nope_head_dim", 128},
                                              {"qk_rope_head_dim", 64},
                                              {"qk_head_dim", 192},
                                              {"v_head_dim", 128},
                                              {"head_dim", 64},
                                              {"hidden_act", "silu"},
                                              {"max_position_embeddings", 163840},
                                              {"rms_norm_eps", 1e-6},
                                              {"rope_parameters",
                                               {{"rope_type", "yarn"},
                                                {"rope_theta", 10000.0},
                                                {"factor", 40.0},
                                                {"original_max_position_embeddings", 4096},
                                                {"beta_fast", 32.0},
                                                {"beta_slow", 1.0},
                                                {"mscale", 0.707},
                                                {"mscale_all_dim", 0.707}}},
                                              {"attention_bias", false},
                                              {"mlp_bias", false},
                                              {"tie_word_embeddings", false}}));

  // Qwen/Qwen3.6-35B-A3B's text model (qwen3_5_moe, the Qwen3.5-35B-A3B architecture): 40
  // layers, 10 × (3 Gated DeltaNet + 1 output-gated full attention), every layer MoE (256 experts
  // of 512, top 8, one shared expert of 512 with its gate); DeltaNet 16 key / 32 value heads of
  // 128; attention 16 query / 2 KV heads of 256, a quarter of each rotated; 248,320-token
  // vocabulary (padded), untied. The card's 35B counts the vision tower and the MTP layer too.
  {
    v.push_back(FromConfig(
        "qwen3.6-35b-a3b",
        {{"architectures", {"Qwen3_5MoeForCausalLM"}},
         {"model_type", "qwen3_5_moe_text"},
         {"vocab_size", 248320},
         {"hidden_size", 2048},
         {"intermediate_size", 512},
         {"moe_intermediate_size", 512},
         {"shared_expert_intermediate_size", 512},
         {"num_experts", 256},
         {"num_experts_per_tok", 8},
         {"num_hidden_layers", 40},
         {"layer_types", DeltaNetPattern(40)},
         {"num_attention_heads", 16},
         {"num_key_value_heads", 2},
         {"head_dim", 256},
         {"hidden_act", "silu"},
         {"linear_conv_kernel_dim", 4},
         {"linear_key_head_dim", 128},
         {"linear_value_head_dim", 128},
         {"linear_num_key_heads", 16},
         {"linear_num_value_heads", 32},
         {"max_position_embeddings", 262144},
         {"rms_norm_eps", 1e-6},
         {"rope_parameters",
          {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}},
         {"attention_bias", false},
         {"tie_word_embeddings", false}}));
  }
  // nvidia/Nemotron-H-8B-Base-8K: 52 blocks by its hybrid_override_pattern (24 Mamba-2, 4
  // attention, 24 ReLU² MLP), Mamba-2 of 128 heads × 64 (expand 2), 8 groups, state 128, conv 4;
  // attention 32 query / 8 KV heads of 128; MLP 21,504; 131,072-token vocabulary, untied.
  v.push_back(FromConfig("nemotron-h-8b", {{"architectures", {"NemotronHForCausalLM"}},
                                           {"model_type", "nemotron_h"},
                                           {"vocab_size", 131072},
                                           {"hidden_size", 4096},
                                           {"intermediate_size", 21504},
                                           {"num_hidden_layers", 52},
                                           {"hybrid_override_pattern",
                                            "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"},
                                           {"num_attention_heads", 32},
                                           {"num_key_value_heads", 8},
                                           {"head_dim", 128},
                                           {"attention_head_dim", 128},
                                           {"mamba_num_heads", 128},
                                           {"mamba_head_dim", 64},
                                           {"ssm_state_size", 128},
                                           {"n_groups", 8},
                                           {"conv_kernel", 4},
                                           {"expand", 2},
                                           {"chunk_size", 128},
                                           {"mlp_hidden_act", "relu2"},
                                           {"mamba_hidden_act", "silu"},
                                           {"use_conv_bias", true},
                                           {"mamba_proj_bias", false},
                                           {"use_bias", false},
                                           {"mlp_bias", false},
                                           {"attention_bias", false},
                                           {"layer_norm_epsilon", 1e-5},
                                           {"rms_norm_eps", 1e-5},
                                           {"max_position_embeddings", 8192},
                                           {"tie_word_embeddings", false}}));

  // A small Gated DeltaNet hybrid (not a hub model; the decode-speed shape of the hybrid
  // mixers): qwen3_5_text's layers, three linear-attention layers to one output-gated full
  // attention layer, Qwen3-Next's DeltaNet head ratio (8 key heads, 16 value heads of 128).
  v.push_back(Qwen35Hybrid("qwen3.5-hybrid-0.4b", 1024, 3072, 16, 32768, false));
  auto th = Qwen35Hybrid("tiny-qwen3.5-hybrid", 64, 128, 4, 512, true);
  th.config["linear_num_key_heads"] = 2;
  th.config["linear_num_value_heads"] = 4;
  th.config["linear_key_head_dim"] = th.config["linear_value_head_dim"] = 16;
  th.config["num_attention_heads"] = th.heads = 4;
  th.config["head_dim"] = th.head_dim = 16;
  v.push_back(th);

  // Test shapes: tiny, fast, same code paths (llama3 rope + tied embeddings; qwen3 MoE).
  auto tl = Llama("tiny-llama", 64, 160, 2, 4, 16, 32.0, true);
  tl.kv_heads = 2;
  tl.vocab = 512;
  tl.test_only = true;
  v.push_back(tl);
  auto tm =
      Qwen("tiny-qwen3-moe", "qwen3_moe", "Qwen3MoeForCausalLM", 64, 128, 2, 4, 2, 512, 32768);
  tm.head_dim = 16;
  tm.qk_norm = true;
  tm.experts = 8;
  tm.experts_per_tok = 2;
  tm.moe_intermediate = 32;
  tm.test_only = true;
  v.push_back(tm);
  return v;
}

}  // namespace

const std::vector<SynthShape>& SynthShapes() {
  static const std::vector<SynthShape> shapes = MakeShapes();
  return shapes;
}

const SynthShape& FindSynthShape(const std::string& name) {
  std::string names;
  for (const auto& s : SynthShapes()) {
    if (s.name == name) return s;
    if (!s.test_only) names += (names.empty() ? "" : ", ") + s.name;
  }
  throw UsageError("synth", fmt::format("unknown model shape '{}' (known: {})", name, names));
}

nlohmann::json SynthConfigJson(const SynthShape& s, int64_t layers) {
  if (layers <= 0) layers = s.layers;
  if (!s.config.is_null()) {  // a spec-built family: its config, cut to `layers`
    nlohmann::json j = s.config;
    j["num_hidden_layers"] = layers;
    if (j.contains("layer_types")) {
      nlohmann::json& t = j["layer_types"];
      t.erase(t.begin() + std::min<int64_t>(layers, int64_t(t.size())), t.end());
    }
    if (j.contains("hybrid_override_pattern"))  // nemotron_h: one symbol a layer
      j["hybrid_override_pattern"] =
          j["hybrid_override_pattern"].get<std::string>().substr(0, size_t(layers));
    j["turboquant_synth"] = {{"like", s.name}, {"layers", layers}};
    return j;
  }
  nlohmann::json j;
  j["architectures"] = {s.architecture};
  j["model_type"] = s.model_type;
  j["vocab_size"] = s.vocab;
  j["hidden_size"] = s.hidden;
  j["intermediate_size"] = s.intermediate;
  j["num_hidden_layers"] = layers;
  j["num_attention_heads"] = s.heads;
  j["num_key_value_heads"] = s.kv_heads;
  j["head_dim"] = s.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = s.max_position_embeddings;
  j["rms_norm_eps"] = s.rms_norm_eps;
  j["rope_theta"] = s.rope_theta;
  if (s.llama3_rope_factor > 0) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.llama3_rope_factor},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["attention_bias"] = s.qkv_bias;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = s.tie_embeddings;
  j["initializer_range"] = 0.02;
  j["torch_dtype"] = "bfloat16";
  j["use_cache"] = true;
  if (s.model_type == "llama") j["mlp_bias"] = false;
  if (s.model_type == "qwen2" || s.model_type == "qwen3" || s.model_type == "qwen3_moe") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = layers;
  }
  if (s.model_type == "qwen3_moe") {
    j["num_experts"] = s.experts;
    j["num_experts_per_tok"] = s.experts_per_tok;
    j["moe_intermediate_size"] = s.moe_intermediate;
    j["norm_topk_prob"] = true;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = nlohmann::json::array();
    j["output_router_logits"] = false;
  }
  if (s.model_type == "mistral") j["sliding_window"] = nullptr;  // v0.2: full attention
  if (s.model_type == "mixtral") {
    j["num_local_experts"] = s.experts;
    j["num_experts_per_tok"] = s.experts_per_tok;
    j["sliding_window"] = nullptr;
  }
  switch (s.tokenizer) {
    case SynthTokenizerStyle::kLlama3:
      j["bos_token_id"] = s.vocab - 256;  // <|begin_of_text|>
      j["eos_token_id"] = s.vocab - 255;  // <|end_of_text|>
      break;
    case SynthTokenizerStyle::kQwen:
      j["bos_token_id"] = s.vocab - 256;  // <|endoftext|>
      j["eos_token_id"] = s.vocab - 256;
      break;
    case SynthTokenizerStyle::kMistral:
      j["bos_token_id"] = 1;
      j["eos_token_id"] = 2;
      break;
  }
  j["turboquant_synth"] = {{"like", s.name}, {"layers", layers}};
  return j;
}

std::vector<SynthTensor> SynthTensors(const SynthShape& s, int64_t layers, ExpertLayout layout) {
  if (layers <= 0) layers = s.layers;
  constexpr float kStd = 0.02f;
  std::vector<SynthTensor> t;
  if (!s.config.is_null()) {  // every tensor the layer spec names; norms ones, the rest random
    const ModelConfig c = ParseModelConfig(SynthConfigJson(s, layers).dump(), "synth " + s.name);
    for (const ExpectedTensor& e : ExpectedTensors(c, layout)) {
      if (!e.required && c.tie_word_embeddings) continue;  // lm_head of a tied model
      const bool norm = e.role == TensorRole::kNorm;
      t.push_back({e.name, e.shape, norm ? 0.0f : kStd, norm});
    }
    return t;
  }
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  t.push_back({"model.embed_tokens.weight", {s.vocab, h}, kStd});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back({p + "input_layernorm.weight", {h}, 0.0f, true});
    t.push_back({p + "self_attn.q_proj.weight", {q, h}, kStd});
    t.push_back({p + "self_attn.k_proj.weight", {kv, h}, kStd});
    t.push_back({p + "self_attn.v_proj.weight", {kv, h}, kStd});
    if (s.qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}, kStd});
      t.push_back({p + "self_attn.k_proj.bias", {kv}, kStd});
      t.push_back({p + "self_attn.v_proj.bias", {kv}, kStd});
    }
    t.push_back({p + "self_attn.o_proj.weight", {h, q}, kStd});
    if (s.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {s.head_dim}, 0.0f, true});
      t.push_back({p + "self_attn.k_norm.weight", {s.head_dim}, 0.0f, true});
    }
    t.push_back({p + "post_attention_layernorm.weight", {h}, 0.0f, true});
    if (s.model_type == "qwen3_moe") {
      const int64_t m = s.moe_intermediate;
      t.push_back({p + "mlp.gate.weight", {s.experts, h}, kStd});
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string ep = fmt::format("{}mlp.experts.{}.", p, e);
        t.push_back({ep + "gate_proj.weight", {m, h}, kStd});
        t.push_back({ep + "up_proj.weight", {m, h}, kStd});
        t.push_back({ep + "down_proj.weight", {h, m}, kStd});
      }
    } else if (s.model_type == "mixtral") {
      const int64_t m = s.intermediate;
      t.push_back({p + "block_sparse_moe.gate.weight", {s.experts, h}, kStd});
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string ep = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
        t.push_back({ep + "w1.weight", {m, h}, kStd});  // gate
        t.push_back({ep + "w2.weight", {h, m}, kStd});  // down
        t.push_back({ep + "w3.weight", {m, h}, kStd});  // up
      }
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {s.intermediate, h}, kStd});
      t.push_back({p + "mlp.up_proj.weight", {s.intermediate, h}, kStd});
      t.push_back({p + "mlp.down_proj.weight", {h, s.intermediate}, kStd});
    }
  }
  t.push_back({"model.norm.weight", {h}, 0.0f, true});
  if (!s.tie_embeddings) t.push_back({"lm_head.weight", {s.vocab, h}, kStd});
  return t;
}

}  // namespace tq
