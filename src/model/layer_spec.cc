// config.json + Architecture -> ModelSpec. The only place where family flags and config keys
// turn into per-layer structure.
#include "model/layer_spec.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/architecture.h"

namespace tq {
namespace {

constexpr const char* kWhere = "layer spec";

Activation ParseActivation(const std::string& name, const std::string& model_type) {
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_tanh" || name == "gelu_new")
    return Activation::kGeluTanh;
  if (name == "relu2") return Activation::kRelu2;
  if (name == "gpt_oss_swiglu") return Activation::kClampedSwiglu;
  Fail(kWhere,
       "{}: unsupported activation '{}' (config.json hidden_act / hidden_activation; supported: "
       "silu, gelu_pytorch_tanh, relu2)",
       model_type, name);
}

// YaRN's attention-logit correction for MLA (deepseek): mscale(factor, mscale_all_dim)².
float MlaYarnScale(const RopeScaling& rs) {
  if (rs.type != RopeScaling::Type::kYarn || !rs.mscale_all_dim || *rs.mscale_all_dim == 0 ||
      rs.factor <= 1)
    return 1.0f;
  const double m = 0.1 * *rs.mscale_all_dim * std::log(rs.factor) + 1.0;
  return float(m * m);
}

RopeSpec MakeRope(const ModelConfig& c, const Architecture& arch, bool sliding, int64_t head_dim) {
  RopeSpec r;
  if (!arch.attn_rope) return r;  // rotary_dim 0: no rotation
  const bool local = sliding && c.sliding_rope.has_value();
  r.theta = local ? c.sliding_rope->theta : c.rope_theta;
  r.scaling = local ? c.sliding_rope->scaling : c.rope_scaling;
  const double frac = local ? c.sliding_rope->partial_rotary_factor : c.partial_rotary_factor;
  r.rotary_dim = int64_t(double(head_dim) * frac);  // as HF: int(head_dim * factor)
  r.rotary_dim -= r.rotary_dim % 2;
  if (r.rotary_dim <= 0)
    Fail(kWhere, "{}: partial_rotary_factor {} leaves no rotary pair of head_dim {}", c.model_type,
         frac, head_dim);
  r.freq_dim = r.scaling.type == RopeScaling::Type::kProportional ? head_dim : r.rotary_dim;
  return r;
}

AttentionSpec MakeAttention(const ModelConfig& c, const Architecture& arch, int64_t l) {
  AttentionSpec a;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  const int64_t override_dim =
      size_t(l) < c.layer_head_dim.size() ? c.layer_head_dim[size_t(l)] : 0;
  a.head_dim = override_dim > 0 ? override_dim : c.head_dim;
  a.v_head_dim = a.head_dim;
  const bool sliding = arch.sliding_window && c.LayerIsSliding(l);
  a.window = sliding ? c.sliding_window : 0;
  if (arch.attn_scale_one) {
    a.scale = 1.0f;
  } else if (c.query_pre_attn_scalar) {
    a.scale = float(1.0 / std::sqrt(*c.query_pre_attn_scalar));
  } else {
    a.scale = float(1.0 / std::sqrt(double(a.head_dim)));
  }
  a.logit_softcap = float(c.attn_logit_softcap);
  a.sinks = arch.attn_sinks;
  a.qk_norm = arch.qk_norm || c.qk_norm;
  a.v_norm = arch.v_norm;
  a.output_gate = arch.attn_output_gate;
  a.qkv_bias = arch.qkv_bias || c.attention_bias;
  a.o_bias = arch.o_bias_follows_config && c.attention_bias;
  a.fused_qkv = arch.fused_qkv;
  a.kv_compressible = a.window == 0;
  a.rope = MakeRope(c, arch, sliding, a.head_dim);
  return a;
}

MoeSpec MakeMoe(const ModelConfig& c, const Architecture& arch) {
  MoeSpec m;
  m.num_experts = c.num_experts;
  m.top_k = c.num_experts_per_tok;
  m.expert_ffn = arch.expert_ffn_is_intermediate_size || c.moe_intermediate_size <= 0
                     ? c.intermediate_size
                     : c.moe_intermediate_size;
  if (c.scoring_func == "softmax") {
    m.router = Router::kSoftmaxTopK;
  } else if (c.scoring_func == "softmax_topk") {
    m.router = Router::kTopKSoftmax;
  } else if (c.scoring_func == "sigmoid") {
    m.router = Router::kSigmoidGroupTopK;
    m.correction_bias = true;
  } else {
    Fail(kWhere, "{}: unsupported router scoring '{}'", c.model_type, c.scoring_func);
  }
  m.renormalize = arch.moe_always_renormalize || c.norm_topk_prob;
  m.routed_scale = float(c.routed_scaling_factor);
  m.n_group = c.n_group;
  m.topk_group = c.topk_group;
  m.router_bias = arch.router_bias;
  m.expert_bias = arch.fused_experts;
  m.fused_experts = arch.fused_experts;
  m.shared_ffn = c.shared_expert_intermediate_size > 0 ? c.shared_expert_intermediate_size
                                                       : c.n_shared_experts * m.expert_ffn;
  m.shared_gate = arch.shared_expert_gate && m.shared_ffn > 0;
  return m;
}

}  // namespace

int64_t LayerSpec::RecurrentStateFloats() const {
  switch (mixer) {
    case MixerKind::kGatedDeltaNet:
      return delta.StateFloats();
    case MixerKind::kMamba2:
      return mamba.StateFloats();
    default:
      return 0;
  }
}

int64_t ModelSpec::CountMixer(MixerKind k) const {
  int64_t n = 0;
  for (const LayerSpec& l : layers) n += l.mixer == k;
  return n;
}

bool ModelSpec::HasRecurrentLayers() const {
  for (const LayerSpec& l : layers)
    if (l.HasRecurrentState()) return true;
  return false;
}

ModelSpec BuildModelSpec(const ModelConfig& c, const Architecture& arch) {
  ModelSpec s;
  s.model_type = c.model_type;
  s.hidden = c.hidden_size;
  s.vocab = c.vocab_size;
  s.norm_eps = float(c.rms_norm_eps);
  s.norm_plus_one = arch.norm_plus_one;
  s.embed_scale = arch.embed_scale_sqrt_hidden ? std::sqrt(float(c.hidden_size)) : 1.0f;
  s.final_logit_softcap = float(c.final_logit_softcap);
  s.tied_embeddings = c.tie_word_embeddings;
  if (arch.per_layer_inputs) {
    s.per_layer_input_dim = c.hidden_size_per_layer_input;
    s.per_layer_vocab = c.vocab_size_per_layer_input;
  }
  const Activation act =
      ParseActivation(arch.activation.empty() ? c.hidden_act : arch.activation, c.model_type);

  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerSpec L;
    L.index = l;
    L.sandwich_norm = arch.sandwich_norm;
    L.per_layer_input = arch.per_layer_inputs && s.per_layer_input_dim > 0;
    const std::string& type = c.LayerType(l);

    // --- mixer ---
    if (type == "mlp" || type == "moe") {
      L.mixer = MixerKind::kNone;
    } else if (type == "mamba") {
      L.mixer = MixerKind::kMamba2;
      const Mamba2Config& m = c.mamba;
      L.mamba = {m.num_heads,
                 m.head_dim,
                 m.state_size,
                 m.n_groups,
                 m.conv_kernel,
                 m.chunk_size,
                 m.conv_bias,
                 m.proj_bias,
                 float(m.time_step_min_clamp),
                 float(std::min(m.time_step_max_clamp, 1e30)),
                 float(m.norm_eps)};
    } else if (type == "linear_attention") {
      L.mixer = MixerKind::kGatedDeltaNet;
      const DeltaNetConfig& d = c.delta_net;
      L.delta = {d.num_key_heads,  d.num_value_heads, d.key_head_dim,
                 d.value_head_dim, d.conv_kernel,     arch.dn_fused_in_proj};
    } else if (c.mla.kv_lora_rank > 0) {
      L.mixer = MixerKind::kMla;
      const MlaConfig& m = c.mla;
      L.mla = {m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim};
      L.attn.num_heads = L.attn.num_kv_heads = c.num_heads;
      L.attn.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
      L.attn.v_head_dim = m.v_head_dim;
      L.attn.scale = float(1.0 / std::sqrt(double(L.attn.head_dim))) * MlaYarnScale(c.rope_scaling);
      L.attn.kv_compressible = false;  // the latent cache is its own compression
      L.attn.rope.theta = c.rope_theta;
      L.attn.rope.scaling = c.rope_scaling;
      L.attn.rope.rotary_dim = L.attn.rope.freq_dim = m.qk_rope_head_dim;
      L.attn.rope.interleaved = m.rope_interleave;
    } else {
      L.mixer = MixerKind::kAttention;
      L.attn = MakeAttention(c, arch, l);
      if (L.attn.rope.rotary_dim > L.attn.head_dim)
        Fail(kWhere, "{} layer {}: rotary dim {} exceeds head_dim {}", c.model_type, l,
             L.attn.rope.rotary_dim, L.attn.head_dim);
    }

    // --- feed-forward ---
    L.ffn.act = act;
    L.ffn.bias = c.mlp_bias;
    L.ffn.fused_gate_up = arch.fused_gate_up;
    L.ffn.ffn = c.intermediate_size;
    if (c.moe_by_layer_type && type != "mlp" && type != "moe") {
      L.ffn.kind = FfnKind::kNone;  // a mixer-only layer
    } else if (arch.moe && c.LayerIsMoe(l)) {
      L.ffn.kind = FfnKind::kMoe;
      L.ffn.moe = MakeMoe(c, arch);
    } else {
      L.ffn.kind = FfnKind::kDense;
    }
    s.layers.push_back(L);
  }
  return s;
}

ModelSpec BuildModelSpec(const ModelConfig& config) {
  return BuildModelSpec(config, FindFamily(config.model_type));
}

const char* MixerKindName(MixerKind k) {
  switch (k) {
    case MixerKind::kNone:
      return "none";
    case MixerKind::kAttention:
      return "attention";
    case MixerKind::kMla:
      return "mla";
    case MixerKind::kGatedDeltaNet:
      return "gated_deltanet";
    case MixerKind::kMamba2:
      return "mamba2";
  }
  return "?";
}

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kRelu2:
      return "relu2";
    case Activation::kClampedSwiglu:
      return "clamped_swiglu";
  }
  return "?";
}

const char* RouterName(Router r) {
  switch (r) {
    case Router::kSoftmaxTopK:
      return "softmax_topk";
    case Router::kTopKSoftmax:
      return "topk_softmax";
    case Router::kSigmoidGroupTopK:
      return "sigmoid_group_topk";
  }
  return "?";
}

}  // namespace tq
