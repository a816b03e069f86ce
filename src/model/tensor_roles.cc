#include "model/tensor_roles.h"

#include "io/model_config.h"
#include "model/architecture.h"

namespace tq {

std::string_view TensorRoleName(TensorRole role) {
  switch (role) {
    case TensorRole::kAttnQ:
      return "attn_q";
    case TensorRole::kAttnK:
      return "attn_k";
    case TensorRole::kAttnV:
      return "attn_v";
    case TensorRole::kAttnO:
      return "attn_o";
    case TensorRole::kMlpGate:
      return "mlp_gate";
    case TensorRole::kMlpUp:
      return "mlp_up";
    case TensorRole::kMlpDown:
      return "mlp_down";
    case TensorRole::kExpertGate:
      return "expert_gate";
    case TensorRole::kExpertUp:
      return "expert_up";
    case TensorRole::kExpertDown:
      return "expert_down";
    case TensorRole::kRouter:
      return "router";
    case TensorRole::kEmbed:
      return "embed";
    case TensorRole::kLmHead:
      return "lm_head";
    case TensorRole::kNorm:
      return "norm";
    case TensorRole::kOther:
      return "other";
  }
  return "other";
}

bool IsDecoderLinear(TensorRole role) {
  switch (role) {
    case TensorRole::kAttnQ:
    case TensorRole::kAttnK:
    case TensorRole::kAttnV:
    case TensorRole::kAttnO:
    case TensorRole::kMlpGate:
    case TensorRole::kMlpUp:
    case TensorRole::kMlpDown:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
      return true;
    default:
      return false;
  }
}

bool IsExpert(TensorRole role) {
  return role == TensorRole::kExpertGate || role == TensorRole::kExpertUp ||
         role == TensorRole::kExpertDown;
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config) {
  return ExpectedTensors(config, FindArchitecture(config.model_type));
}

// Mirrors LoadWeights (weights.cc): the same names, shapes and bias/qk-norm/MoE conditions.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c, const Architecture& arch) {
  const ArchTensorNames& nm = arch.names;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  std::vector<ExpectedTensor> out;
  auto add = [&](std::string name, TensorRole role, Shape shape, int64_t layer = -1,
                 int64_t expert = -1, bool is_bias = false, bool required = true) {
    out.push_back({std::move(name), role, layer, expert, is_bias, std::move(shape), required});
  };
  // A linear [rows, cols] at module prefix `p` (+ its bias [rows]).
  auto linear = [&](const std::string& p, TensorRole role, int64_t rows, int64_t cols, bool bias,
                    int64_t layer, int64_t expert = -1) {
    add(p + ".weight", role, {rows, cols}, layer, expert);
    if (bias) add(p + ".bias", role, {rows}, layer, expert, true);
  };

  add(nm.embed, TensorRole::kEmbed, {c.vocab_size, hidden});
  // The loader uses the embedding when the config ties them or the head is absent.
  add(nm.lm_head + ".weight", TensorRole::kLmHead, {c.vocab_size, hidden}, -1, -1, false,
      /*required=*/false);
  add(nm.final_norm, TensorRole::kNorm, {hidden});

  const bool qkv_bias = arch.qkv_bias || c.attention_bias;
  const bool o_bias = arch.o_bias_follows_config && c.attention_bias;
  const bool qk_norm = arch.qk_norm || c.qk_norm;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
    add(name(nm.attn_norm), TensorRole::kNorm, {hidden}, l);
    add(name(nm.ffn_norm), TensorRole::kNorm, {hidden}, l);
    linear(name(nm.q), TensorRole::kAttnQ, c.num_heads * hd, hidden, qkv_bias, l);
    linear(name(nm.k), TensorRole::kAttnK, c.num_kv_heads * hd, hidden, qkv_bias, l);
    linear(name(nm.v), TensorRole::kAttnV, c.num_kv_heads * hd, hidden, qkv_bias, l);
    linear(name(nm.o), TensorRole::kAttnO, hidden, c.num_heads * hd, o_bias, l);
    if (qk_norm) {
      add(name(nm.q_norm), TensorRole::kNorm, {hd}, l);
      add(name(nm.k_norm), TensorRole::kNorm, {hd}, l);
    }
    if (arch.moe && c.LayerIsMoe(l)) {
      const int64_t ffn =
          c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
      linear(name(nm.router), TensorRole::kRouter, c.num_experts, hidden, false, l);
      for (int64_t e = 0; e < c.num_experts; ++e) {
        linear(TensorName(nm.expert_gate, l, e), TensorRole::kExpertGate, ffn, hidden, false, l, e);
        linear(TensorName(nm.expert_up, l, e), TensorRole::kExpertUp, ffn, hidden, false, l, e);
        linear(TensorName(nm.expert_down, l, e), TensorRole::kExpertDown, hidden, ffn, false, l, e);
      }
    } else {
      const int64_t ffn = c.intermediate_size;
      linear(name(nm.gate), TensorRole::kMlpGate, ffn, hidden, c.mlp_bias, l);
      linear(name(nm.up), TensorRole::kMlpUp, ffn, hidden, c.mlp_bias, l);
      linear(name(nm.down), TensorRole::kMlpDown, hidden, ffn, c.mlp_bias, l);
    }
  }
  return out;
}

TensorRoleMap::TensorRoleMap(const ModelConfig& config)
    : TensorRoleMap(config, FindArchitecture(config.model_type)) {}

TensorRoleMap::TensorRoleMap(const ModelConfig& config, const Architecture& arch)
    : expected_(ExpectedTensors(config, arch)) {
  constexpr std::string_view kWeight = ".weight";
  for (size_t i = 0; i < expected_.size(); ++i) {
    const std::string& n = expected_[i].name;
    by_name_.emplace(n, i);
    if (!expected_[i].is_bias && n.ends_with(kWeight))
      by_prefix_.emplace(n.substr(0, n.size() - kWeight.size()), i);
  }
}

const ExpectedTensor* TensorRoleMap::Find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &expected_[it->second];
}

std::optional<ExpectedTensor> TensorRoleMap::Classify(std::string_view name) const {
  if (const ExpectedTensor* t = Find(name)) return *t;
  // Strip trailing components until a linear's module prefix matches.
  std::string_view p = name;
  for (size_t dot = p.rfind('.'); dot != std::string_view::npos; dot = p.rfind('.')) {
    p = p.substr(0, dot);
    const auto it = by_prefix_.find(std::string(p));
    if (it != by_prefix_.end()) return expected_[it->second];
  }
  return std::nullopt;
}

}  // namespace tq
