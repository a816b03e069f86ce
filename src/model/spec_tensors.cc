// ExpectedTensors: every tensor of a checkpoint with its shape and role, walked from the layer
// spec (layer_spec.h) and the architecture's names — the one description of a model's structure
// that weights, convert's roles, plan and doctor share.
#include "core/error.h"
#include "io/model_config.h"
#include "model/architecture.h"
#include "model/layer_spec.h"
#include "model/tensor_roles.h"

namespace tq {
namespace {

class TensorList {
 public:
  explicit TensorList(std::vector<ExpectedTensor>& out) : out_(out) {}

  void Add(std::string name, TensorRole role, Shape shape, int64_t layer = -1, int64_t expert = -1,
           bool is_bias = false, bool required = true) {
    out_.push_back({std::move(name), role, layer, expert, is_bias, std::move(shape), required});
  }
  // A linear [rows, cols] at module prefix `p` (+ its bias [rows]).
  void Linear(const std::string& p, TensorRole role, int64_t rows, int64_t cols, bool bias,
              int64_t layer, int64_t expert = -1) {
    Add(p + ".weight", role, {rows, cols}, layer, expert);
    if (bias) Add(p + ".bias", role, {rows}, layer, expert, true);
  }

 private:
  std::vector<ExpectedTensor>& out_;
};

void AttentionTensors(const LayerSpec& L, const ArchTensorNames& nm, int64_t hidden,
                      TensorList& t) {
  const int64_t l = L.index;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
  const AttentionSpec& a = L.attn;
  const int64_t q_rows = a.num_heads * a.head_dim * (a.output_gate ? 2 : 1);
  const int64_t kv_rows = a.num_kv_heads * a.head_dim;
  if (a.fused_qkv) {
    t.Linear(name(nm.qkv), TensorRole::kAttnQkv, q_rows + 2 * kv_rows, hidden, a.qkv_bias, l);
  } else {
    t.Linear(name(nm.q), TensorRole::kAttnQ, q_rows, hidden, a.qkv_bias, l);
    t.Linear(name(nm.k), TensorRole::kAttnK, kv_rows, hidden, a.qkv_bias, l);
    t.Linear(name(nm.v), TensorRole::kAttnV, kv_rows, hidden, a.qkv_bias, l);
  }
  t.Linear(name(nm.o), TensorRole::kAttnO, hidden, a.num_heads * a.v_head_dim, a.o_bias, l);
  if (a.qk_norm) {
    t.Add(name(nm.q_norm), TensorRole::kNorm, {a.head_dim}, l);
    t.Add(name(nm.k_norm), TensorRole::kNorm, {a.head_dim}, l);
  }
  if (a.sinks) t.Add(name(nm.sinks), TensorRole::kOther, {a.num_heads}, l);
}

void MlaTensors(const LayerSpec& L, const ArchTensorNames& nm, int64_t hidden, TensorList& t) {
  const int64_t l = L.index;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
  const MlaSpec& m = L.mla;
  const int64_t heads = L.attn.num_heads;
  const int64_t q_rows = heads * (m.nope_dim + m.rope_dim);
  if (m.q_lora_rank > 0) {
    t.Linear(name(nm.mla_q_a), TensorRole::kMlaQA, m.q_lora_rank, hidden, false, l);
    t.Add(name(nm.mla_q_a_norm), TensorRole::kNorm, {m.q_lora_rank}, l);
    t.Linear(name(nm.mla_q_b), TensorRole::kMlaQB, q_rows, m.q_lora_rank, false, l);
  } else {
    t.Linear(name(nm.q), TensorRole::kAttnQ, q_rows, hidden, false, l);
  }
  t.Linear(name(nm.mla_kv_a), TensorRole::kMlaKvA, m.kv_lora_rank + m.rope_dim, hidden, false, l);
  t.Add(name(nm.mla_kv_a_norm), TensorRole::kNorm, {m.kv_lora_rank}, l);
  t.Linear(name(nm.mla_kv_b), TensorRole::kMlaKvB, heads * (m.nope_dim + m.v_dim), m.kv_lora_rank,
           false, l);
  t.Linear(name(nm.o), TensorRole::kAttnO, hidden, heads * m.v_dim, false, l);
}

void DeltaNetTensors(const LayerSpec& L, const ArchTensorNames& nm, int64_t hidden, TensorList& t) {
  const int64_t l = L.index;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
  const DeltaNetSpec& d = L.delta;
  if (d.fused_in_proj) {
    t.Linear(name(nm.dn_qkvz), TensorRole::kLinearAttnIn, 2 * d.KeyDim() + 2 * d.ValueDim(), hidden,
             false, l);
    t.Linear(name(nm.dn_ba), TensorRole::kLinearAttnIn, 2 * d.num_v_heads, hidden, false, l);
  } else {
    t.Linear(name(nm.dn_qkv), TensorRole::kLinearAttnIn, d.ConvDim(), hidden, false, l);
    t.Linear(name(nm.dn_z), TensorRole::kLinearAttnIn, d.ValueDim(), hidden, false, l);
    t.Linear(name(nm.dn_b), TensorRole::kLinearAttnIn, d.num_v_heads, hidden, false, l);
    t.Linear(name(nm.dn_a), TensorRole::kLinearAttnIn, d.num_v_heads, hidden, false, l);
  }
  t.Add(name(nm.dn_conv) + ".weight", TensorRole::kOther, {d.ConvDim(), 1, d.conv_kernel}, l);
  t.Add(name(nm.dn_a_log), TensorRole::kOther, {d.num_v_heads}, l);
  t.Add(name(nm.dn_dt_bias), TensorRole::kOther, {d.num_v_heads}, l);
  t.Add(name(nm.dn_norm), TensorRole::kNorm, {d.v_dim}, l);
  t.Linear(name(nm.dn_out), TensorRole::kLinearAttnOut, hidden, d.ValueDim(), false, l);
}

void MambaTensors(const LayerSpec& L, const ArchTensorNames& nm, int64_t hidden, TensorList& t) {
  const int64_t l = L.index;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
  const Mamba2Spec& m = L.mamba;
  t.Linear(name(nm.ssm_in), TensorRole::kSsmIn, m.InProjRows(), hidden, m.proj_bias, l);
  t.Add(name(nm.ssm_conv) + ".weight", TensorRole::kOther, {m.ConvDim(), 1, m.conv_kernel}, l);
  if (m.conv_bias)
    t.Add(name(nm.ssm_conv) + ".bias", TensorRole::kOther, {m.ConvDim()}, l, -1, true);
  t.Add(name(nm.ssm_a_log), TensorRole::kOther, {m.num_heads}, l);
  t.Add(name(nm.ssm_d), TensorRole::kOther, {m.num_heads}, l);
  t.Add(name(nm.ssm_dt_bias), TensorRole::kOther, {m.num_heads}, l);
  t.Add(name(nm.ssm_norm), TensorRole::kNorm, {m.Inner()}, l);
  t.Linear(name(nm.ssm_out), TensorRole::kSsmOut, hidden, m.Inner(), m.proj_bias, l);
}

// gate/up/down (gated) or up/down (ungated: relu²) at the given names.
void MlpTensors(const std::string& gate, const std::string& up, const std::string& down,
                TensorRole rg, TensorRole ru, TensorRole rd, bool gated, int64_t ffn,
                int64_t hidden, bool bias, int64_t l, int64_t e, TensorList& t) {
  if (gated) t.Linear(gate, rg, ffn, hidden, bias, l, e);
  t.Linear(up, ru, ffn, hidden, bias, l, e);
  t.Linear(down, rd, hidden, ffn, bias, l, e);
}

void FfnTensors(const LayerSpec& L, const ArchTensorNames& nm, int64_t hidden, ExpertLayout layout,
                TensorList& t) {
  const int64_t l = L.index;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
  const FfnSpec& f = L.ffn;
  if (f.kind == FfnKind::kDense) {
    if (f.fused_gate_up) {
      t.Linear(name(nm.gate_up), TensorRole::kMlpGateUp, 2 * f.ffn, hidden, f.bias, l);
      t.Linear(name(nm.down), TensorRole::kMlpDown, hidden, f.ffn, f.bias, l);
    } else {
      MlpTensors(name(nm.gate), name(nm.up), name(nm.down), TensorRole::kMlpGate,
                 TensorRole::kMlpUp, TensorRole::kMlpDown, f.gated(), f.ffn, hidden, f.bias, l, -1,
                 t);
    }
    return;
  }
  if (f.kind != FfnKind::kMoe) return;
  const MoeSpec& m = f.moe;
  t.Linear(name(nm.router), TensorRole::kRouter, m.num_experts, hidden, m.router_bias, l);
  if (m.correction_bias)
    t.Add(name(nm.router_correction_bias), TensorRole::kOther, {m.num_experts}, l);
  if (m.fused_experts && layout == ExpertLayout::kPublished) {
    const std::string gu = name(nm.experts_gate_up), dn = name(nm.experts_down);
    t.Add(gu, TensorRole::kExpertGateUp, {m.num_experts, hidden, 2 * m.expert_ffn}, l);
    t.Add(gu + "_bias", TensorRole::kExpertGateUp, {m.num_experts, 2 * m.expert_ffn}, l, -1, true);
    t.Add(dn, TensorRole::kExpertDown, {m.num_experts, m.expert_ffn, hidden}, l);
    t.Add(dn + "_bias", TensorRole::kExpertDown, {m.num_experts, hidden}, l, -1, true);
  } else {
    for (int64_t e = 0; e < m.num_experts; ++e)
      MlpTensors(TensorName(nm.expert_gate, l, e), TensorName(nm.expert_up, l, e),
                 TensorName(nm.expert_down, l, e), TensorRole::kExpertGate, TensorRole::kExpertUp,
                 TensorRole::kExpertDown, f.gated(), m.expert_ffn, hidden, m.expert_bias, l, e, t);
  }
  if (m.shared_ffn > 0) {
    MlpTensors(name(nm.shared_gate), name(nm.shared_up), name(nm.shared_down),
               TensorRole::kSharedGate, TensorRole::kSharedUp, TensorRole::kSharedDown, f.gated(),
               m.shared_ffn, hidden, false, l, -1, t);
    if (m.shared_gate)
      t.Linear(name(nm.shared_expert_gate), TensorRole::kOther, 1, hidden, false, l);
  }
}

}  // namespace

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config, ExpertLayout layout) {
  return ExpectedTensors(config, FindArchitecture(config), layout);
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c, const Architecture& arch,
                                            ExpertLayout layout) {
  const ModelSpec spec = BuildModelSpec(c, arch);
  const ArchTensorNames& nm = arch.names;
  const int64_t hidden = spec.hidden;
  std::vector<ExpectedTensor> out;
  TensorList t(out);

  t.Add(nm.embed, TensorRole::kEmbed, {spec.vocab, hidden});
  // The loader uses the embedding when the config ties them or the head is absent.
  t.Add(nm.lm_head + ".weight", TensorRole::kLmHead, {spec.vocab, hidden}, -1, -1, false,
        /*required=*/false);
  t.Add(nm.final_norm, TensorRole::kNorm, {hidden});
  const int64_t num_layers = int64_t(spec.layers.size());
  if (spec.per_layer_input_dim > 0) {
    const int64_t d = spec.per_layer_input_dim;
    t.Add(nm.ple_embed, TensorRole::kPerLayerInput, {spec.per_layer_vocab, num_layers * d});
    t.Linear(nm.ple_model_proj, TensorRole::kPerLayerInput, num_layers * d, hidden, false, -1);
    t.Add(nm.ple_proj_norm, TensorRole::kNorm, {d});
  }

  for (const LayerSpec& L : spec.layers) {
    const int64_t l = L.index;
    auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
    // One norm per block; a single-block layer (nemotron_h) has only its attn_norm name.
    const bool has_mixer = L.mixer != MixerKind::kNone;
    const bool has_ffn = L.ffn.kind != FfnKind::kNone;
    if (has_mixer) t.Add(name(nm.attn_norm), TensorRole::kNorm, {hidden}, l);
    if (has_ffn && name(nm.ffn_norm) != name(nm.attn_norm))
      t.Add(name(nm.ffn_norm), TensorRole::kNorm, {hidden}, l);
    if (has_ffn && !has_mixer && name(nm.ffn_norm) == name(nm.attn_norm))
      t.Add(name(nm.attn_norm), TensorRole::kNorm, {hidden}, l);
    if (L.sandwich_norm) {
      t.Add(name(nm.post_attn_norm), TensorRole::kNorm, {hidden}, l);
      t.Add(name(nm.post_ffn_norm), TensorRole::kNorm, {hidden}, l);
    }
    switch (L.mixer) {
      case MixerKind::kNone:
        break;
      case MixerKind::kAttention:
        AttentionTensors(L, nm, hidden, t);
        break;
      case MixerKind::kMla:
        MlaTensors(L, nm, hidden, t);
        break;
      case MixerKind::kGatedDeltaNet:
        DeltaNetTensors(L, nm, hidden, t);
        break;
      case MixerKind::kMamba2:
        MambaTensors(L, nm, hidden, t);
        break;
    }
    FfnTensors(L, nm, hidden, layout, t);
    if (L.per_layer_input) {
      const int64_t d = spec.per_layer_input_dim;
      t.Linear(name(nm.ple_gate), TensorRole::kPerLayerInput, d, hidden, false, l);
      t.Linear(name(nm.ple_proj), TensorRole::kPerLayerInput, hidden, d, false, l);
      t.Add(name(nm.ple_post_norm), TensorRole::kNorm, {hidden}, l);
      t.Add(name(nm.layer_scalar), TensorRole::kOther, {1}, l);
    }
  }
  return out;
}

}  // namespace tq
