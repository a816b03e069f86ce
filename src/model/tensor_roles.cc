#include "model/tensor_roles.h"

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/architecture.h"
#include "model/layer_spec.h"

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
    case TensorRole::kAttnQkv:
      return "attn_qkv";
    case TensorRole::kMlpGateUp:
      return "mlp_gate_up";
    case TensorRole::kExpertGateUp:
      return "expert_gate_up";
    case TensorRole::kSharedGate:
      return "shared_gate";
    case TensorRole::kSharedUp:
      return "shared_up";
    case TensorRole::kSharedDown:
      return "shared_down";
    case TensorRole::kMlaQA:
      return "mla_q_a";
    case TensorRole::kMlaQB:
      return "mla_q_b";
    case TensorRole::kMlaKvA:
      return "mla_kv_a";
    case TensorRole::kMlaKvB:
      return "mla_kv_b";
    case TensorRole::kLinearAttnIn:
      return "linear_attn_in";
    case TensorRole::kLinearAttnOut:
      return "linear_attn_out";
    case TensorRole::kSsmIn:
      return "ssm_in";
    case TensorRole::kSsmOut:
      return "ssm_out";
    case TensorRole::kPerLayerInput:
      return "per_layer_input";
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
    case TensorRole::kAttnQkv:
    case TensorRole::kMlpGateUp:
    case TensorRole::kExpertGateUp:
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown:
    case TensorRole::kMlaQA:
    case TensorRole::kMlaQB:
    case TensorRole::kMlaKvA:
    case TensorRole::kMlaKvB:
    case TensorRole::kLinearAttnIn:
    case TensorRole::kLinearAttnOut:
    case TensorRole::kSsmIn:
    case TensorRole::kSsmOut:
      return true;
    default:
      return false;
  }
}

bool IsExpert(TensorRole role) {
  return role == TensorRole::kExpertGate || role == TensorRole::kExpertUp ||
         role == TensorRole::kExpertDown || role == TensorRole::kExpertGateUp;
}

ExpertLayout ExpertLayoutOf(const ModelConfig& config, const std::vector<TensorInfo>& tensors) {
  const Architecture& arch = FindArchitecture(config);
  if (!arch.fused_experts) return ExpertLayout::kPublished;
  const ModelSpec spec = BuildModelSpec(config, arch);
  for (const LayerSpec& L : spec.layers) {
    if (L.ffn.kind != FfnKind::kMoe) continue;
    // "<prefix>." starts every tensor a per-expert linear is stored as (.weight, .codes, ...).
    const std::string gate = TensorName(arch.names.expert_gate, L.index, 0) + ".";
    const std::string up = TensorName(arch.names.expert_up, L.index, 0) + ".";
    for (const TensorInfo& t : tensors)
      if (t.name.starts_with(gate) || t.name.starts_with(up)) return ExpertLayout::kPerExpert;
    break;  // the first MoE layer decides
  }
  return ExpertLayout::kPublished;
}

TensorRoleMap::TensorRoleMap(const ModelConfig& config, ExpertLayout layout)
    : TensorRoleMap(config, FindArchitecture(config), layout) {}

TensorRoleMap TensorRoleMap::Of(const ModelConfig& config, const std::vector<TensorInfo>& tensors) {
  return TensorRoleMap(config, ExpertLayoutOf(config, tensors));
}

TensorRoleMap::TensorRoleMap(const ModelConfig& config, const Architecture& arch,
                             ExpertLayout layout)
    : expected_(ExpectedTensors(config, arch, layout)) {
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
