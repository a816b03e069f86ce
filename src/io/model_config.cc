// config.json / generation_config.json -> plain structs. Defaults follow the Hugging Face
// configuration classes of each model type (transformers 4.5x/5.x) where a key is absent.
#include "io/model_config.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/json_fields.h"
#include "io/model_config_parse.h"
#include "io/tqmlx_import.h"

namespace tq {
namespace {

using namespace config_parse;

enum class Sliding { kNone, kAllLayers, kQwen, kLayerTypes };
enum class Moe { kNone, kMixtral, kQwen, kGptOss, kDeepseek, kNemotron };
// What replaces attention on some layers.
enum class Mixers { kAttention, kDeltaNetHybrid, kNemotron, kMla };

// What differs between the supported model types as far as config.json goes (the defaults of
// each Hugging Face config class; what the model does with it is model/'s business).
struct TypeTraits {
  const char* name;
  int64_t max_position_embeddings;
  double rms_norm_eps;
  double rope_theta;
  int64_t default_head_dim;  // 0: hidden_size / num_attention_heads
  bool qk_norm;
  enum { kKey, kAlwaysTrue, kAlwaysFalse } attention_bias;
  bool attention_bias_default;  // when the key is absent (gpt_oss: true)
  bool mlp_bias_key;            // reads "mlp_bias" (llama only)
  Sliding sliding;
  int64_t default_sliding_window;  // when the key is absent (mistral: 4096)
  int64_t sliding_period;          // kLayerTypes default: layer l slides unless (l+1) % period == 0
  Moe moe;
  Mixers mixers;
  bool tie_default;         // tie_word_embeddings when absent (gemma: true)
  const char* act_default;  // hidden_act when absent
  bool norm_topk_default;   // norm_topk_prob when absent
};

using T = TypeTraits;
constexpr TypeTraits kTypes[] = {
    // name, max_pos, eps, theta, head_dim, qk_norm, bias, bias dflt, mlp_bias, sliding, window,
    // period, moe, mixers, tie, act, norm_topk
    {"llama", 2048, 1e-6, 1e4, 0, false, T::kKey, false, true, Sliding::kNone, 0, 0, Moe::kNone,
     Mixers::kAttention, false, "silu", true},
    {"mistral", 4096 * 32, 1e-6, 1e4, 0, false, T::kAlwaysFalse, false, false, Sliding::kAllLayers,
     4096, 0, Moe::kNone, Mixers::kAttention, false, "silu", true},
    {"qwen2", 32768, 1e-6, 1e4, 0, false, T::kAlwaysTrue, false, false, Sliding::kQwen, 4096, 0,
     Moe::kNone, Mixers::kAttention, false, "silu", true},
    {"qwen3", 32768, 1e-6, 1e4, 128, true, T::kKey, false, false, Sliding::kQwen, 4096, 0,
     Moe::kNone, Mixers::kAttention, false, "silu", true},
    {"qwen3_moe", 32768, 1e-6, 1e4, 0, true, T::kKey, false, false, Sliding::kQwen, 4096, 0,
     Moe::kQwen, Mixers::kAttention, false, "silu", false},
    {"mixtral", 4096 * 32, 1e-5, 1e6, 0, false, T::kAlwaysFalse, false, false, Sliding::kAllLayers,
     0, 0, Moe::kMixtral, Mixers::kAttention, false, "silu", true},
    {"gemma2", 8192, 1e-6, 1e4, 256, false, T::kKey, false, false, Sliding::kLayerTypes, 4096, 2,
     Moe::kNone, Mixers::kAttention, true, "gelu_pytorch_tanh", true},
    {"gemma3_text", 131072, 1e-6, 1e6, 256, true, T::kKey, false, false, Sliding::kLayerTypes, 4096,
     6, Moe::kNone, Mixers::kAttention, true, "gelu_pytorch_tanh", true},
    {"gemma4_text", 131072, 1e-6, 1e6, 256, true, T::kKey, false, false, Sliding::kLayerTypes, 512,
     6, Moe::kNone, Mixers::kAttention, true, "gelu_pytorch_tanh", true},
    {"phi3", 4096, 1e-5, 1e4, 0, false, T::kAlwaysFalse, false, false, Sliding::kAllLayers, 0, 0,
     Moe::kNone, Mixers::kAttention, false, "silu", true},
    {"qwen2_moe", 32768, 1e-6, 1e4, 0, false, T::kAlwaysTrue, false, false, Sliding::kQwen, 4096, 0,
     Moe::kQwen, Mixers::kAttention, false, "silu", false},
    {"gpt_oss", 131072, 1e-5, 150000.0, 64, false, T::kKey, true, false, Sliding::kLayerTypes, 128,
     2, Moe::kGptOss, Mixers::kAttention, false, "silu", true},
    {"qwen3_next", 32768, 1e-6, 1e4, 256, true, T::kKey, false, false, Sliding::kNone, 0, 0,
     Moe::kQwen, Mixers::kDeltaNetHybrid, false, "silu", true},
    {"qwen3_5_text", 32768, 1e-6, 1e4, 256, true, T::kKey, false, false, Sliding::kNone, 0, 0,
     Moe::kNone, Mixers::kDeltaNetHybrid, false, "silu", true},
    {"qwen3_5_moe_text", 32768, 1e-6, 1e4, 256, true, T::kKey, false, false, Sliding::kNone, 0, 0,
     Moe::kQwen, Mixers::kDeltaNetHybrid, false, "silu", true},
    {"nemotron_h", 4096, 1e-5, 1e4, 0, false, T::kKey, false, false, Sliding::kNone, 0, 0,
     Moe::kNemotron, Mixers::kNemotron, false, "relu2", true},
    {"deepseek_v2", 2048, 1e-6, 1e4, 0, false, T::kKey, false, false, Sliding::kNone, 0, 0,
     Moe::kDeepseek, Mixers::kMla, false, "silu", false},
    {"deepseek_v3", 4096, 1e-6, 1e4, 0, false, T::kKey, false, false, Sliding::kNone, 0, 0,
     Moe::kDeepseek, Mixers::kMla, false, "silu", true},
};

// Multimodal wrappers whose text_config names no model_type: the text model type they hold.
constexpr std::pair<const char*, const char*> kWrappers[] = {
    {"gemma3", "gemma3_text"},
    {"gemma4", "gemma4_text"},
    {"qwen3_5", "qwen3_5_text"},
    {"qwen3_5_moe", "qwen3_5_moe_text"},
};

// rope_scaling (old style) or rope_parameters (transformers >= 5): the scaling variant.
RopeScaling ParseRopeScaling(const JsonFields& f, bool type_optional, int64_t max_pos) {
  RopeScaling r;
  auto type = f.String("rope_type");
  if (!type) type = f.String("type");
  if (!type) {
    if (!type_optional) f.FailField("rope_type", "required but missing");
    type = "default";
  }
  const std::string& t = *type;
  if (t == "default") {
    r.type = RopeScaling::Type::kNone;
    return r;
  } else if (t == "linear") {
    r.type = RopeScaling::Type::kLinear;
  } else if (t == "llama3") {
    r.type = RopeScaling::Type::kLlama3;
  } else if (t == "yarn") {
    r.type = RopeScaling::Type::kYarn;
  } else if (t == "dynamic") {
    r.type = RopeScaling::Type::kDynamic;
  } else if (t == "proportional") {
    r.type = RopeScaling::Type::kProportional;  // no factor: only the rotated fraction changes
    return r;
  } else {
    f.FailField("rope_type", fmt::format("unsupported rope type '{}' (supported: default, linear, "
                                         "llama3, yarn, dynamic, proportional)",
                                         t));
  }
  if (!f.Has("factor")) f.FailField("factor", fmt::format("required for rope type '{}'", t));
  r.factor = PositiveDouble(f, "factor", 1.0);
  const auto orig = f.Int("original_max_position_embeddings");
  if (r.type == RopeScaling::Type::kLlama3) {
    if (!orig) f.FailField("original_max_position_embeddings", "required for rope type 'llama3'");
    if (!f.Has("low_freq_factor")) f.FailField("low_freq_factor", "required for 'llama3'");
    if (!f.Has("high_freq_factor")) f.FailField("high_freq_factor", "required for 'llama3'");
    r.low_freq_factor = PositiveDouble(f, "low_freq_factor", 1.0);
    r.high_freq_factor = PositiveDouble(f, "high_freq_factor", 4.0);
    if (!(r.high_freq_factor > r.low_freq_factor))
      f.FailField("high_freq_factor", fmt::format("must exceed low_freq_factor ({} <= {})",
                                                  r.high_freq_factor, r.low_freq_factor));
  }
  r.original_max_position_embeddings =
      orig ? CheckRange(f, "original_max_position_embeddings", *orig, 1) : max_pos;
  if (r.type == RopeScaling::Type::kYarn) {
    r.beta_fast = f.Double("beta_fast").value_or(32.0);
    r.beta_slow = f.Double("beta_slow").value_or(1.0);
    r.mscale = f.Double("mscale");
    r.mscale_all_dim = f.Double("mscale_all_dim");
    r.attention_factor = f.Double("attention_factor");
    r.truncate = f.Bool("truncate").value_or(true);
  }
  return r;
}

double RotaryFraction(const JsonFields& f, const std::string& key, double dflt) {
  const double v = f.Double(key).value_or(dflt);
  if (!(v > 0 && v <= 1)) f.FailField(key, fmt::format("must be in (0, 1], got {}", v));
  return v;
}

// One rope_parameters object (theta, scaling, partial_rotary_factor) over defaults `p`.
RopeParams ParseRopeParams(const JsonFields& pf, RopeParams p, bool scaling_done, int64_t max_pos) {
  if (auto v = pf.Double("rope_theta")) p.theta = *v;
  if (!scaling_done) p.scaling = ParseRopeScaling(pf, true, max_pos);
  p.partial_rotary_factor = RotaryFraction(pf, "partial_rotary_factor", p.partial_rotary_factor);
  if (!(p.theta > 0)) pf.FailField("rope_theta", fmt::format("must be > 0, got {}", p.theta));
  return p;
}

// rope_theta / rope_scaling (classic), rope_parameters (transformers >= 5, possibly one object
// per layer type), partial_rotary_factor, gemma3's rope_local_base_freq.
void ParseRope(const JsonFields& top, ModelConfig& c, double dflt_theta) {
  RopeParams full;
  full.theta = top.Double("rope_theta").value_or(dflt_theta);
  full.partial_rotary_factor = RotaryFraction(top, "partial_rotary_factor", 1.0);
  bool scaling_done = false;
  if (const auto* rs = top.Get("rope_scaling")) {
    if (!rs->is_object())
      top.FailField("rope_scaling",
                    fmt::format("expected an object or null, got {}", rs->type_name()));
    full.scaling = ParseRopeScaling(JsonFields(*rs, top.where(), "rope_scaling."), false,
                                    c.max_position_embeddings);
    scaling_done = true;
  }
  if (auto local = top.Double("rope_local_base_freq")) {
    RopeParams sliding;
    sliding.theta = *local;
    if (!(sliding.theta > 0))
      top.FailField("rope_local_base_freq", fmt::format("must be > 0, got {}", sliding.theta));
    c.sliding_rope = sliding;
  }
  if (const auto* rp = top.Get("rope_parameters")) {
    if (!rp->is_object())
      top.FailField("rope_parameters", fmt::format("expected an object, got {}", rp->type_name()));
    // Per-layer-type form {"full_attention": {...}, "sliding_attention": {...}}.
    if (!rp->contains("rope_type") && !rp->contains("rope_theta") &&
        (rp->contains("full_attention") || rp->contains("sliding_attention"))) {
      for (const auto& [kind, sub] : rp->items()) {
        const std::string prefix = "rope_parameters." + kind + ".";
        if (!sub.is_object()) top.FailField("rope_parameters." + kind, "expected an object");
        if (kind != "full_attention" && kind != "sliding_attention")
          top.FailField("rope_parameters." + kind,
                        "unknown layer type (expected full_attention or sliding_attention)");
        const JsonFields pf(sub, top.where(), prefix);
        if (kind == "full_attention") {
          full = ParseRopeParams(pf, full, scaling_done, c.max_position_embeddings);
        } else {
          RopeParams base;
          base.theta = full.theta;
          c.sliding_rope = ParseRopeParams(pf, base, false, c.max_position_embeddings);
        }
      }
    } else {
      full = ParseRopeParams(JsonFields(*rp, top.where(), "rope_parameters."), full, scaling_done,
                             c.max_position_embeddings);
    }
  }
  if (!(full.theta > 0))
    top.FailField("rope_theta", fmt::format("must be > 0, got {}", full.theta));
  c.rope_theta = full.theta;
  c.rope_scaling = full.scaling;
  c.partial_rotary_factor = full.partial_rotary_factor;
}

// layer_types: a list of num_layers strings out of `allowed`.
void ParseLayerTypes(const JsonFields& f, ModelConfig& c,
                     std::initializer_list<const char*> allowed) {
  const auto* lt = f.Get("layer_types");
  if (!lt) return;
  if (!lt->is_array() || int64_t(lt->size()) != c.num_layers)
    f.FailField("layer_types", fmt::format("expected a list of {} strings", c.num_layers));
  c.layer_types.clear();
  for (const auto& e : *lt) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || (e.is_string() && e == a);
    if (!ok) f.FailField("layer_types", fmt::format("unsupported layer type {}", e.dump()));
    c.layer_types.push_back(e.get<std::string>());
  }
}

}  // namespace

const std::vector<std::string>& SupportedModelTypes() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> v;
    for (const auto& t : kTypes) v.push_back(t.name);
    return v;
  }();
  return types;
}

bool ModelConfig::LayerIsMoe(int64_t l) const {
  if (num_experts <= 0 || l < 0 || l >= num_layers) return false;
  if (moe_by_layer_type) return layer_types[size_t(l)] == "moe";  // nemotron_h
  if (first_k_dense_replace > 0 || moe_layer_freq > 1)            // deepseek
    return l >= first_k_dense_replace && l % moe_layer_freq == 0;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) != mlp_only_layers.end())
    return false;
  return decoder_sparse_step > 0 && (l + 1) % decoder_sparse_step == 0;
}

bool ModelConfig::LayerIsSliding(int64_t l) const {
  if (sliding_window <= 0 || l < 0 || l >= num_layers) return false;
  if (!layer_types.empty()) return layer_types[size_t(l)] == "sliding_attention";
  if (sliding_all_layers) return true;
  return l >= max_window_layers;  // qwen2 / qwen3 / qwen3_moe
}

const std::string& ModelConfig::LayerType(int64_t l) const {
  static const std::string full = "full_attention";
  if (l < 0 || size_t(l) >= layer_types.size()) return full;
  return layer_types[size_t(l)];
}

namespace {

const TypeTraits* FindTraits(const std::string& type) {
  for (const auto& t : kTypes)
    if (type == t.name) return &t;
  return nullptr;
}

void ParseSliding(const nlohmann::json& j, const JsonFields& f, const TypeTraits& tt,
                  ModelConfig& c) {
  const bool window_key_present = j.contains("sliding_window");
  const auto window = f.Int("sliding_window");  // null -> none
  if (window) CheckRange(f, "sliding_window", *window, 0, INT64_MAX);
  const int64_t w = window_key_present ? window.value_or(0) : tt.default_sliding_window;
  switch (tt.sliding) {
    case Sliding::kNone:
      break;
    case Sliding::kAllLayers:
      c.sliding_window = w;
      c.sliding_all_layers = true;
      break;
    case Sliding::kQwen: {
      const bool use = f.Bool("use_sliding_window").value_or(false);
      c.max_window_layers = f.Int("max_window_layers").value_or(28);
      CheckRange(f, "max_window_layers", c.max_window_layers, 0, INT64_MAX);
      if (use) c.sliding_window = w;
      ParseLayerTypes(f, c, {"full_attention", "sliding_attention"});
      break;
    }
    case Sliding::kLayerTypes: {
      c.sliding_window = w;
      ParseLayerTypes(f, c, {"full_attention", "sliding_attention"});
      if (c.layer_types.empty()) {
        // gemma3: sliding_window_pattern (or _sliding_window_pattern) overrides the period.
        int64_t period = tt.sliding_period;
        for (const char* key : {"sliding_window_pattern", "_sliding_window_pattern"})
          if (auto p = f.Int(key)) period = CheckRange(f, key, *p, 1);
        for (int64_t l = 0; l < c.num_layers; ++l)
          c.layer_types.push_back((l + 1) % period ? "sliding_attention" : "full_attention");
      }
      break;
    }
  }
}

void ParseMoe(const JsonFields& f, const TypeTraits& tt, ModelConfig& c) {
  switch (tt.moe) {
    case Moe::kNone:
      return;
    case Moe::kMixtral:
    case Moe::kGptOss:
      c.num_experts = SizeField(f, "num_local_experts");
      c.num_experts_per_tok = SizeField(f, "num_experts_per_tok");
      c.moe_intermediate_size = c.intermediate_size;
      c.norm_topk_prob = true;
      c.scoring_func = "softmax_topk";  // softmax over the top-k logits
      break;
    case Moe::kQwen:
      c.num_experts = SizeField(f, "num_experts");
      c.num_experts_per_tok = SizeField(f, "num_experts_per_tok");
      c.moe_intermediate_size = SizeField(f, "moe_intermediate_size");
      c.shared_expert_intermediate_size = OptionalSize(f, "shared_expert_intermediate_size");
      c.decoder_sparse_step = SizeField(f, "decoder_sparse_step", 1);
      c.mlp_only_layers = f.IntList("mlp_only_layers");
      for (int64_t l : c.mlp_only_layers)
        if (l < 0 || l >= c.num_layers)
          f.FailField("mlp_only_layers",
                      fmt::format("layer {} is outside [0, {})", l, c.num_layers));
      break;
    case Moe::kDeepseek:
    case Moe::kNemotron: {
      if (tt.moe == Moe::kNemotron && !f.Has("n_routed_experts")) {
        for (const std::string& t : c.layer_types)
          if (t == "moe") f.FailField("n_routed_experts", "required by the 'moe' layers");
        return;  // a dense hybrid (Nemotron-H 8B/47B/56B)
      }
      c.num_experts = SizeField(f, "n_routed_experts");
      c.num_experts_per_tok = SizeField(f, "num_experts_per_tok");
      c.moe_intermediate_size = SizeField(f, "moe_intermediate_size");
      c.n_shared_experts = OptionalSize(f, "n_shared_experts");
      c.routed_scaling_factor = PositiveDouble(f, "routed_scaling_factor", 1.0);
      c.n_group = SizeField(f, "n_group", 1);
      c.topk_group = SizeField(f, "topk_group", 1);
      if (c.num_experts % c.n_group != 0)
        f.FailField("n_group", fmt::format("{} does not divide n_routed_experts {}", c.n_group,
                                           c.num_experts));
      if (c.topk_group > c.n_group)
        f.FailField("topk_group", fmt::format("{} exceeds n_group {}", c.topk_group, c.n_group));
      if (tt.moe == Moe::kNemotron) {
        c.scoring_func = "sigmoid";
        c.shared_expert_intermediate_size = OptionalSize(f, "moe_shared_expert_intermediate_size");
        break;
      }
      c.first_k_dense_replace = f.Int("first_k_dense_replace").value_or(0);
      CheckRange(f, "first_k_dense_replace", c.first_k_dense_replace, 0, c.num_layers);
      c.moe_layer_freq = SizeField(f, "moe_layer_freq", 1);
      // deepseek_v2: topk_method greedy / group_limited_greedy over softmax scores; v3:
      // noaux_tc over sigmoid scores (scoring_func key).
      const std::string dflt = c.model_type == "deepseek_v3" ? "sigmoid" : "softmax";
      c.scoring_func = f.String("scoring_func").value_or(dflt);
      if (c.scoring_func != "softmax" && c.scoring_func != "sigmoid")
        f.FailField("scoring_func",
                    fmt::format("unsupported '{}' (supported: softmax, sigmoid)", c.scoring_func));
      const std::string method =
          f.String("topk_method").value_or(c.model_type == "deepseek_v3" ? "noaux_tc" : "greedy");
      if (method != "greedy" && method != "group_limited_greedy" && method != "noaux_tc")
        f.FailField("topk_method", fmt::format("unsupported '{}' (supported: greedy, "
                                               "group_limited_greedy, noaux_tc)",
                                               method));
      if (method == "greedy") c.n_group = c.topk_group = 1;
      break;
    }
  }
  c.norm_topk_prob = f.Bool("norm_topk_prob").value_or(tt.norm_topk_default);
  if (tt.moe == Moe::kMixtral || tt.moe == Moe::kGptOss) c.norm_topk_prob = true;
  if (c.num_experts_per_tok > c.num_experts)
    f.FailField("num_experts_per_tok",
                fmt::format("{} exceeds the {} experts", c.num_experts_per_tok, c.num_experts));
}

// The text model's fields from object `j` (the whole file, or a wrapper's text_config).
void ParseTextModel(const nlohmann::json& j, const JsonFields& f, const TypeTraits& tt,
                    ModelConfig& c) {
  if (const auto* a = f.Get("architectures")) {
    if (!a->is_array() || (!a->empty() && !(*a)[0].is_string()))
      f.FailField("architectures", "expected a list of strings");
    if (!a->empty() && c.architecture.empty()) c.architecture = (*a)[0].get<std::string>();
  }

  c.vocab_size = SizeField(f, "vocab_size");
  c.hidden_size = SizeField(f, "hidden_size");
  // nemotron_h: num_hidden_layers may be absent (the length of its layer pattern).
  c.num_layers = tt.mixers == Mixers::kNemotron && !f.Has("num_hidden_layers")
                     ? 0
                     : SizeField(f, "num_hidden_layers");
  // nemotron_h has no dense intermediate size on pure hybrid configs; the others need it.
  c.intermediate_size =
      SizeField(f, "intermediate_size",
                tt.mixers == Mixers::kNemotron ? std::optional<int64_t>(1) : std::nullopt);
  c.num_heads = SizeField(f, "num_attention_heads");
  c.num_kv_heads = SizeField(f, "num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    f.FailField("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}",
                                                   c.num_kv_heads, c.num_heads));
  if (f.Has("head_dim")) {
    c.head_dim = SizeField(f, "head_dim");
  } else if (f.Has("attention_head_dim")) {
    c.head_dim = SizeField(f, "attention_head_dim");
  } else if (tt.default_head_dim > 0) {
    c.head_dim = tt.default_head_dim;
  } else {
    if (c.hidden_size % c.num_heads != 0)
      f.FailField("head_dim", fmt::format("absent and hidden_size {} is not a multiple of "
                                          "num_attention_heads {}",
                                          c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.max_position_embeddings = SizeField(f, "max_position_embeddings", tt.max_position_embeddings);
  // nemotron_h's RMSNorms use layer_norm_epsilon.
  const char* eps_key = tt.mixers == Mixers::kNemotron ? "layer_norm_epsilon" : "rms_norm_eps";
  c.rms_norm_eps = PositiveDouble(f, eps_key, tt.rms_norm_eps);
  c.hidden_act = tt.act_default;
  for (const char* key : {"hidden_act", "hidden_activation", "mlp_hidden_act"})
    if (auto a = f.String(key)) c.hidden_act = *a;
  if (auto t = f.Bool("tie_word_embeddings")) c.tie_word_embeddings = *t;
  switch (tt.attention_bias) {
    case TypeTraits::kKey:
      c.attention_bias = f.Bool("attention_bias").value_or(tt.attention_bias_default);
      break;
    case TypeTraits::kAlwaysTrue:
      c.attention_bias = f.Bool("qkv_bias").value_or(true);
      break;
    case TypeTraits::kAlwaysFalse:
      c.attention_bias = false;
      break;
  }
  c.mlp_bias = tt.mlp_bias_key ? f.Bool("mlp_bias").value_or(false) : false;
  c.qk_norm = tt.qk_norm;
  ParseRope(f, c, tt.rope_theta);
  if (auto s = f.Double("query_pre_attn_scalar")) {
    if (!(*s > 0)) f.FailField("query_pre_attn_scalar", fmt::format("must be > 0, got {}", *s));
    c.query_pre_attn_scalar = *s;
  }
  for (auto [key, out] : {std::pair{"attn_logit_softcapping", &c.attn_logit_softcap},
                          {"final_logit_softcapping", &c.final_logit_softcap}}) {
    *out = f.Double(key).value_or(0.0);
    if (*out < 0) f.FailField(key, fmt::format("must be >= 0 or null, got {}", *out));
  }

  ParseSliding(j, f, tt, c);
  switch (tt.mixers) {
    case Mixers::kAttention:
      break;
    case Mixers::kDeltaNetHybrid: {
      ParseLayerTypes(f, c, {"full_attention", "linear_attention"});
      if (c.layer_types.empty()) {
        const int64_t every = SizeField(f, "full_attention_interval", 4);
        for (int64_t l = 0; l < c.num_layers; ++l)
          c.layer_types.push_back((l + 1) % every ? "linear_attention" : "full_attention");
      }
      ParseDeltaNet(f, c);
      break;
    }
    case Mixers::kNemotron:
      ParseNemotronPattern(f, c);
      ParseMamba2(f, c);
      break;
    case Mixers::kMla:
      ParseMla(f, c);
      break;
  }
  if (c.model_type == "gemma4_text") ParseGemma4(f, c);
  ParseMoe(f, tt, c);
}

}  // namespace

ModelConfig ParseModelConfig(const std::string& json_text, const std::string& where) {
  const nlohmann::json j = ParseJson(json_text, where);
  const JsonFields top(j, where);
  ModelConfig c;
  c.raw_json = json_text;

  auto type = top.String("model_type");
  if (!type) top.FailField("model_type", "required but missing");
  const nlohmann::json* text = &j;
  std::string prefix;
  if (const auto* tc = top.Get("text_config")) {
    if (!tc->is_object())
      top.FailField("text_config", fmt::format("expected an object, got {}", tc->type_name()));
    c.wrapper_model_type = *type;
    const JsonFields tf(*tc, where, "text_config.");
    if (auto inner = tf.String("model_type")) {
      type = inner;
    } else {
      type.reset();
      for (auto [outer, inner_type] : kWrappers)
        if (c.wrapper_model_type == outer) type = inner_type;
      if (!type)
        tf.FailField("model_type", fmt::format("required: wrapper '{}' has no known text model",
                                               c.wrapper_model_type));
    }
    text = tc;
    prefix = "text_config.";
    // Outer architectures name the wrapper (Gemma3ForConditionalGeneration).
    if (const auto* a = top.Get("architectures");
        a && a->is_array() && !a->empty() && (*a)[0].is_string())
      c.architecture = (*a)[0].get<std::string>();
  }
  const TypeTraits* tt = FindTraits(*type);
  if (!tt) {
    std::string list;
    for (const auto& s : SupportedModelTypes()) list += (list.empty() ? "" : ", ") + s;
    Fail(where, "unsupported model_type '{}' (supported: {})", *type, list);
  }
  c.model_type = *type;
  c.tie_word_embeddings = tt->tie_default;
  if (prefix.empty()) {
    ParseTextModel(j, top, *tt, c);
  } else {
    if (auto t = top.Bool("tie_word_embeddings")) c.tie_word_embeddings = *t;
    ParseTextModel(*text, JsonFields(*text, where, prefix), *tt, c);
  }

  const JsonFields tf(*text, where, prefix);
  c.bos_token_ids = tf.IntOrList("bos_token_id");
  c.eos_token_ids = tf.IntOrList("eos_token_id");
  if (c.bos_token_ids.empty()) c.bos_token_ids = top.IntOrList("bos_token_id");
  if (c.eos_token_ids.empty()) c.eos_token_ids = top.IntOrList("eos_token_id");
  for (const JsonFields* f : {&tf, &top}) {
    if (!c.torch_dtype.empty()) break;
    if (auto d = f->String("torch_dtype")) {
      c.torch_dtype = *d;
    } else if (auto d2 = f->String("dtype")) {
      c.torch_dtype = *d2;
    }
  }
  return c;
}

ModelConfig LoadModelConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  // A turboquant-mlx directory reads as the native checkpoint it imports as (tqmlx_import.h).
  if (tqmlx::IsTqMlxDir(model_dir))
    return ParseModelConfig(tqmlx::NativeConfigJson(model_dir), "config " + path);
  return ParseModelConfig(ReadFileToString(path), "config " + path);
}

GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& where) {
  const nlohmann::json j = ParseJson(json_text, where);
  const JsonFields f(j, where);
  GenerationConfig g;
  g.temperature = f.Double("temperature");
  g.top_p = f.Double("top_p");
  g.min_p = f.Double("min_p");
  g.repetition_penalty = f.Double("repetition_penalty");
  g.top_k = f.Int("top_k");
  g.max_new_tokens = f.Int("max_new_tokens");
  g.do_sample = f.Bool("do_sample");
  g.eos_token_ids = f.IntOrList("eos_token_id");
  g.bos_token_id = f.Int("bos_token_id");
  g.pad_token_id = f.Int("pad_token_id");
  return g;
}

GenerationConfig LoadGenerationConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  return ParseGenerationConfig(ReadFileToString(path), "generation_config " + path);
}

}  // namespace tq
