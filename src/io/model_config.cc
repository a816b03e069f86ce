// config.json / generation_config.json -> plain structs. Defaults follow the Hugging Face
// configuration classes of each model type (transformers 4.5x/5.x) where a key is absent.
#include "io/model_config.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/json_fields.h"
#include "io/tqmlx_import.h"

namespace tq {
namespace {

enum class Sliding { kNone, kAllLayers, kQwen };
enum class Moe { kNone, kMixtral, kQwen3Moe };

// What differs between the supported model types as far as config.json goes.
struct TypeTraits {
  const char* name;
  int64_t max_position_embeddings;
  double rms_norm_eps;
  double rope_theta;
  int64_t default_head_dim;  // 0: hidden_size / num_attention_heads
  bool qk_norm;
  enum { kKey, kAlwaysTrue, kAlwaysFalse } attention_bias;
  bool mlp_bias_key;  // reads "mlp_bias" (llama only)
  Sliding sliding;
  int64_t default_sliding_window;  // when the key is absent (mistral: 4096)
  Moe moe;
};

constexpr TypeTraits kTypes[] = {
    {"llama", 2048, 1e-6, 10000.0, 0, false, TypeTraits::kKey, true, Sliding::kNone, 0, Moe::kNone},
    {"mistral", 4096 * 32, 1e-6, 10000.0, 0, false, TypeTraits::kAlwaysFalse, false,
     Sliding::kAllLayers, 4096, Moe::kNone},
    {"qwen2", 32768, 1e-6, 10000.0, 0, false, TypeTraits::kAlwaysTrue, false, Sliding::kQwen, 4096,
     Moe::kNone},
    {"qwen3", 32768, 1e-6, 10000.0, 128, true, TypeTraits::kKey, false, Sliding::kQwen, 4096,
     Moe::kNone},
    {"qwen3_moe", 32768, 1e-6, 10000.0, 0, true, TypeTraits::kKey, false, Sliding::kQwen, 4096,
     Moe::kQwen3Moe},
    {"mixtral", 4096 * 32, 1e-5, 1e6, 0, false, TypeTraits::kAlwaysFalse, false,
     Sliding::kAllLayers, 0, Moe::kMixtral},
};

constexpr int64_t kMaxSize = INT32_MAX;  // keeps products of two sizes inside int64

int64_t CheckRange(const JsonFields& f, const std::string& key, int64_t v, int64_t lo,
                   int64_t hi = kMaxSize) {
  if (v < lo || v > hi) f.FailField(key, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
  return v;
}

int64_t SizeField(const JsonFields& f, const std::string& key, std::optional<int64_t> dflt = {}) {
  auto v = f.Int(key);
  if (!v) {
    if (!dflt) f.FailField(key, "required but missing");
    return *dflt;
  }
  return CheckRange(f, key, *v, 1);
}

double PositiveDouble(const JsonFields& f, const std::string& key, double dflt) {
  const double v = f.Double(key).value_or(dflt);
  if (!(v > 0)) f.FailField(key, fmt::format("must be > 0, got {}", v));
  return v;
}

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
  } else {
    f.FailField("rope_type", fmt::format("unsupported rope type '{}' (supported: default, linear, "
                                         "llama3, yarn, dynamic)",
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

void ParseRope(const JsonFields& top, ModelConfig& c, double dflt_theta) {
  c.rope_theta = dflt_theta;
  if (auto v = top.Double("rope_theta")) c.rope_theta = *v;
  bool scaling_done = false;
  if (const auto* rs = top.Get("rope_scaling")) {
    if (!rs->is_object())
      top.FailField("rope_scaling",
                    fmt::format("expected an object or null, got {}", rs->type_name()));
    c.rope_scaling = ParseRopeScaling(JsonFields(*rs, top.where(), "rope_scaling."), false,
                                      c.max_position_embeddings);
    scaling_done = true;
  }
  if (const auto* rp = top.Get("rope_parameters")) {
    if (!rp->is_object())
      top.FailField("rope_parameters", fmt::format("expected an object, got {}", rp->type_name()));
    const nlohmann::json* params = rp;
    std::string prefix = "rope_parameters.";
    // Per-layer-type form {"full_attention": {...}, "sliding_attention": {...}}.
    if (!rp->contains("rope_type") && !rp->contains("rope_theta") &&
        rp->contains("full_attention")) {
      params = &(*rp)["full_attention"];
      prefix += "full_attention.";
      if (!params->is_object())
        top.FailField("rope_parameters.full_attention", "expected an object");
    }
    const JsonFields pf(*params, top.where(), prefix);
    if (auto v = pf.Double("rope_theta")) c.rope_theta = *v;
    if (!scaling_done) c.rope_scaling = ParseRopeScaling(pf, true, c.max_position_embeddings);
  }
  if (!(c.rope_theta > 0))
    top.FailField("rope_theta", fmt::format("must be > 0, got {}", c.rope_theta));
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
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) != mlp_only_layers.end())
    return false;
  return decoder_sparse_step > 0 && (l + 1) % decoder_sparse_step == 0;
}

bool ModelConfig::LayerIsSliding(int64_t l) const {
  if (sliding_window <= 0 || l < 0 || l >= num_layers) return false;
  if (!layer_types.empty()) return layer_types[size_t(l)] == "sliding_attention";
  if (model_type == "mistral" || model_type == "mixtral") return true;
  return l >= max_window_layers;  // qwen2 / qwen3 / qwen3_moe
}

ModelConfig ParseModelConfig(const std::string& json_text, const std::string& where) {
  const nlohmann::json j = ParseJson(json_text, where);
  const JsonFields f(j, where);
  ModelConfig c;
  c.raw_json = json_text;

  const auto type = f.String("model_type");
  if (!type) f.FailField("model_type", "required but missing");
  const TypeTraits* tt = nullptr;
  for (const auto& t : kTypes)
    if (*type == t.name) tt = &t;
  if (!tt) {
    std::string list;
    for (const auto& s : SupportedModelTypes()) list += (list.empty() ? "" : ", ") + s;
    Fail(where, "unsupported model_type '{}' (supported: {})", *type, list);
  }
  c.model_type = *type;

  if (const auto* a = f.Get("architectures")) {
    if (!a->is_array() || (!a->empty() && !(*a)[0].is_string()))
      f.FailField("architectures", "expected a list of strings");
    if (!a->empty()) c.architecture = (*a)[0].get<std::string>();
  }

  c.vocab_size = SizeField(f, "vocab_size");
  c.hidden_size = SizeField(f, "hidden_size");
  c.intermediate_size = SizeField(f, "intermediate_size");
  c.num_layers = SizeField(f, "num_hidden_layers");
  c.num_heads = SizeField(f, "num_attention_heads");
  c.num_kv_heads = SizeField(f, "num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    f.FailField("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}",
                                                   c.num_kv_heads, c.num_heads));
  if (f.Has("head_dim")) {
    c.head_dim = SizeField(f, "head_dim");
  } else if (tt->default_head_dim > 0) {
    c.head_dim = tt->default_head_dim;
  } else {
    if (c.hidden_size % c.num_heads != 0)
      f.FailField("head_dim", fmt::format("absent and hidden_size {} is not a multiple of "
                                          "num_attention_heads {}",
                                          c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.max_position_embeddings = SizeField(f, "max_position_embeddings", tt->max_position_embeddings);
  c.rms_norm_eps = PositiveDouble(f, "rms_norm_eps", tt->rms_norm_eps);
  c.hidden_act = f.String("hidden_act").value_or("silu");
  c.tie_word_embeddings = f.Bool("tie_word_embeddings").value_or(false);
  switch (tt->attention_bias) {
    case TypeTraits::kKey:
      c.attention_bias = f.Bool("attention_bias").value_or(false);
      break;
    case TypeTraits::kAlwaysTrue:
      c.attention_bias = true;
      break;
    case TypeTraits::kAlwaysFalse:
      c.attention_bias = false;
      break;
  }
  c.mlp_bias = tt->mlp_bias_key ? f.Bool("mlp_bias").value_or(false) : false;
  c.qk_norm = tt->qk_norm;
  ParseRope(f, c, tt->rope_theta);

  // Sliding window.
  const bool window_key_present = j.contains("sliding_window");
  const auto window = f.Int("sliding_window");  // null -> none
  if (window) CheckRange(f, "sliding_window", *window, 0, INT64_MAX);
  switch (tt->sliding) {
    case Sliding::kNone:
      break;
    case Sliding::kAllLayers:
      c.sliding_window = window_key_present ? window.value_or(0) : tt->default_sliding_window;
      break;
    case Sliding::kQwen: {
      const bool use = f.Bool("use_sliding_window").value_or(false);
      c.max_window_layers = f.Int("max_window_layers").value_or(28);
      CheckRange(f, "max_window_layers", c.max_window_layers, 0, INT64_MAX);
      if (use)
        c.sliding_window = window_key_present ? window.value_or(0) : tt->default_sliding_window;
      if (const auto* lt = f.Get("layer_types")) {
        if (!lt->is_array() || int64_t(lt->size()) != c.num_layers)
          f.FailField("layer_types", fmt::format("expected a list of {} strings", c.num_layers));
        for (const auto& e : *lt) {
          if (!e.is_string() || (e != "full_attention" && e != "sliding_attention"))
            f.FailField("layer_types", fmt::format("unsupported layer type {}", e.dump()));
          c.layer_types.push_back(e.get<std::string>());
        }
      }
      break;
    }
  }

  // MoE.
  switch (tt->moe) {
    case Moe::kNone:
      break;
    case Moe::kMixtral:
      c.num_experts = SizeField(f, "num_local_experts");
      c.num_experts_per_tok = SizeField(f, "num_experts_per_tok");
      c.moe_intermediate_size = c.intermediate_size;
      c.norm_topk_prob = true;
      c.decoder_sparse_step = 1;
      break;
    case Moe::kQwen3Moe:
      c.num_experts = SizeField(f, "num_experts");
      c.num_experts_per_tok = SizeField(f, "num_experts_per_tok");
      c.moe_intermediate_size = SizeField(f, "moe_intermediate_size");
      c.norm_topk_prob = f.Bool("norm_topk_prob").value_or(false);
      c.decoder_sparse_step = SizeField(f, "decoder_sparse_step", 1);
      c.mlp_only_layers = f.IntList("mlp_only_layers");
      for (int64_t l : c.mlp_only_layers)
        if (l < 0 || l >= c.num_layers)
          f.FailField("mlp_only_layers",
                      fmt::format("layer {} is outside [0, {})", l, c.num_layers));
      break;
  }
  if (c.num_experts_per_tok > c.num_experts)
    f.FailField("num_experts_per_tok",
                fmt::format("{} exceeds the {} experts", c.num_experts_per_tok, c.num_experts));

  c.bos_token_ids = f.IntOrList("bos_token_id");
  c.eos_token_ids = f.IntOrList("eos_token_id");
  if (auto d = f.String("torch_dtype")) {
    c.torch_dtype = *d;
  } else if (auto d2 = f.String("dtype")) {
    c.torch_dtype = *d2;
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
