// The family sections of config.json: MLA (deepseek), Gated DeltaNet (qwen3_next / qwen3_5),
// Mamba-2 and the hybrid layer pattern (nemotron_h), gemma4's per-layer overrides. Each reads
// the Hugging Face keys of its config class with that class's defaults.
#include <cmath>

#include "core/error.h"
#include "io/model_config_parse.h"

namespace tq::config_parse {

int64_t CheckRange(const JsonFields& f, const std::string& key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) f.FailField(key, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
  return v;
}

int64_t SizeField(const JsonFields& f, const std::string& key, std::optional<int64_t> dflt) {
  auto v = f.Int(key);
  if (!v) {
    if (!dflt) f.FailField(key, "required but missing");
    return *dflt;
  }
  return CheckRange(f, key, *v, 1);
}

int64_t OptionalSize(const JsonFields& f, const std::string& key) {
  const auto v = f.Int(key);
  return v ? CheckRange(f, key, *v, 0) : 0;
}

double PositiveDouble(const JsonFields& f, const std::string& key, double dflt) {
  const double v = f.Double(key).value_or(dflt);
  if (!(v > 0)) f.FailField(key, fmt::format("must be > 0, got {}", v));
  return v;
}

void ParseMla(const JsonFields& f, ModelConfig& c) {
  MlaConfig& m = c.mla;
  m.q_lora_rank = OptionalSize(f, "q_lora_rank");
  m.kv_lora_rank = SizeField(f, "kv_lora_rank");
  m.qk_nope_head_dim = SizeField(f, "qk_nope_head_dim");
  m.qk_rope_head_dim = SizeField(f, "qk_rope_head_dim");
  m.v_head_dim = SizeField(f, "v_head_dim");
  if (m.qk_rope_head_dim % 2 != 0)
    f.FailField("qk_rope_head_dim", fmt::format("must be even, got {}", m.qk_rope_head_dim));
  m.rope_interleave = f.Bool("rope_interleave").value_or(true);
  // The rotary part is what RoPE sees; head_dim keeps the q·k width for the attention scale.
  c.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
}

void ParseDeltaNet(const JsonFields& f, ModelConfig& c) {
  DeltaNetConfig& d = c.delta_net;
  d.num_key_heads = SizeField(f, "linear_num_key_heads", 16);
  d.num_value_heads = SizeField(f, "linear_num_value_heads", 32);
  d.key_head_dim = SizeField(f, "linear_key_head_dim", 128);
  d.value_head_dim = SizeField(f, "linear_value_head_dim", 128);
  d.conv_kernel = SizeField(f, "linear_conv_kernel_dim", 4);
  if (d.num_value_heads % d.num_key_heads != 0)
    f.FailField("linear_num_value_heads",
                fmt::format("{} is not a multiple of linear_num_key_heads {}", d.num_value_heads,
                            d.num_key_heads));
}

// time_step_limit: [min, max]; transformers writes infinity as {"__float__": "Infinity"}.
double TimeStepBound(const JsonFields& f, const nlohmann::json& e) {
  if (e.is_number()) return e.get<double>();
  if (e.is_object() && e.contains("__float__") && e["__float__"].is_string()) {
    const std::string s = e["__float__"].get<std::string>();
    if (s == "Infinity" || s == "inf") return INFINITY;
  }
  f.FailField("time_step_limit", fmt::format("expected a number, got {}", e.dump()));
}

void ParseMamba2(const JsonFields& f, ModelConfig& c) {
  Mamba2Config& m = c.mamba;
  m.num_heads = SizeField(f, "mamba_num_heads", 128);
  m.head_dim = SizeField(f, "mamba_head_dim", 64);
  m.state_size = SizeField(f, "ssm_state_size", 128);
  m.n_groups = SizeField(f, "n_groups", 8);
  m.conv_kernel = SizeField(f, "conv_kernel", 4);
  m.chunk_size = SizeField(f, "chunk_size", 128);
  m.conv_bias = f.Bool("use_conv_bias").value_or(true);
  m.proj_bias = f.Bool("mamba_proj_bias").value_or(f.Bool("use_bias").value_or(false));
  m.norm_eps = PositiveDouble(f, "layer_norm_epsilon", 1e-5);
  if (m.num_heads % m.n_groups != 0)
    f.FailField("n_groups",
                fmt::format("{} does not divide mamba_num_heads {}", m.n_groups, m.num_heads));
  if (const auto* tl = f.Get("time_step_limit")) {
    if (!tl->is_array() || tl->size() != 2) f.FailField("time_step_limit", "expected [min, max]");
    m.time_step_min_clamp = TimeStepBound(f, (*tl)[0]);
    m.time_step_max_clamp = TimeStepBound(f, (*tl)[1]);
    if (!(m.time_step_min_clamp >= 0 && m.time_step_max_clamp > m.time_step_min_clamp))
      f.FailField("time_step_limit", fmt::format("expected 0 <= min < max, got [{}, {}]",
                                                 m.time_step_min_clamp, m.time_step_max_clamp));
  }
}

void ParseNemotronPattern(const JsonFields& f, ModelConfig& c) {
  std::vector<std::string> kinds;
  if (const auto* bt = f.Get("layers_block_type")) {
    if (!bt->is_array()) f.FailField("layers_block_type", "expected a list of strings");
    for (const auto& e : *bt) {
      const std::string s = e.is_string() ? e.get<std::string>() : "";
      if (s == "mamba" || s == "linear_attention") {
        kinds.push_back("mamba");
      } else if (s == "attention" || s == "full_attention") {
        kinds.push_back("full_attention");
      } else if (s == "mlp" || s == "moe") {
        kinds.push_back(s);
      } else {
        f.FailField("layers_block_type",
                    fmt::format("unsupported block type {} (supported: mamba, linear_attention, "
                                "attention, full_attention, mlp, moe)",
                                e.dump()));
      }
    }
  } else if (auto pat = f.String("hybrid_override_pattern")) {
    for (char ch : *pat) {
      switch (ch) {
        case 'M':
          kinds.push_back("mamba");
          break;
        case '*':
          kinds.push_back("full_attention");
          break;
        case '-':
          kinds.push_back("mlp");
          break;
        case 'E':
          kinds.push_back("moe");
          break;
        default:
          f.FailField("hybrid_override_pattern",
                      fmt::format("unsupported symbol '{}' (supported: M * - E)", ch));
      }
    }
  } else {
    f.FailField("layers_block_type", "required (or hybrid_override_pattern) but missing");
  }
  if (c.num_layers == 0) {  // num_hidden_layers absent: the pattern decides
    if (kinds.empty()) f.FailField("layers_block_type", "is empty");
    c.num_layers = CheckRange(f, "layers_block_type", int64_t(kinds.size()), 1);
  }
  if (int64_t(kinds.size()) != c.num_layers)
    f.FailField("layers_block_type",
                fmt::format("has {} entries for num_hidden_layers {}", kinds.size(), c.num_layers));
  c.layer_types = std::move(kinds);
  c.moe_by_layer_type = true;
}

void ParseGemma4(const JsonFields& f, ModelConfig& c) {
  c.hidden_size_per_layer_input = OptionalSize(f, "hidden_size_per_layer_input");
  c.vocab_size_per_layer_input = c.hidden_size_per_layer_input > 0
                                     ? SizeField(f, "vocab_size_per_layer_input", c.vocab_size)
                                     : 0;
  c.num_kv_shared_layers = OptionalSize(f, "num_kv_shared_layers");
  if (c.num_kv_shared_layers >= c.num_layers)
    f.FailField("num_kv_shared_layers", fmt::format("{} leaves no layer computing its KV "
                                                    "(num_hidden_layers {})",
                                                    c.num_kv_shared_layers, c.num_layers));
  c.attention_k_eq_v = f.Bool("attention_k_eq_v").value_or(false);
  for (const char* key : {"enable_moe_block", "use_double_wide_mlp"})
    if (f.Bool(key).value_or(false))
      f.FailField(key, "gemma4 variant not supported yet (only its dense text model is)");
  c.layer_head_dim.assign(size_t(c.num_layers), 0);
  if (const auto* plc = f.Get("per_layer_config")) {
    if (!plc->is_object()) f.FailField("per_layer_config", "expected an object");
    for (const auto& [key, value] : plc->items()) {
      int64_t l = -1;
      try {
        size_t used = 0;
        l = std::stoll(key, &used);
        if (used != key.size()) l = -1;
      } catch (const std::exception&) {
        l = -1;
      }
      if (l < 0 || l >= c.num_layers)
        f.FailField("per_layer_config",
                    fmt::format("key '{}' is not a layer index in [0, {})", key, c.num_layers));
      if (!value.is_object()) f.FailField("per_layer_config." + key, "expected an object");
      const JsonFields lf(value, f.where(), "per_layer_config." + key + ".");
      for (const auto& [k, v] : value.items())
        if (k != "head_dim")
          lf.FailField(k, "unsupported per-layer override (supported: head_dim)");
      c.layer_head_dim[size_t(l)] = SizeField(lf, "head_dim");
    }
  }
}

}  // namespace tq::config_parse
