// What each tensor of a checkpoint is for, from config.json and the architecture's tensor names
// (architecture.h): the tensors the loader (weights.cc) expects with their shapes, and the role
// of any tensor name. Used by the quantization recipe (quant_recipe.h), `plan` and `doctor`, so
// they all agree with what Model::Load reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace tq {

struct Architecture;
struct ModelConfig;
struct TensorInfo;

// How a checkpoint stores the experts of a family published with fused expert tensors (gpt_oss:
// [E, hidden, 2·ffn] gate/up interleaved + [E, ffn, hidden], biases [E, ...]):
// - kPublished: as the family publishes them (the layer spec's `fused_experts`);
// - kPerExpert: one linear per expert and projection, [out, in] + bias [out], at the names the
//   other MoE families use ("model.layers.L.mlp.experts.E.gate_proj"): what `convert` writes.
// For every other family both are the same list.
enum class ExpertLayout : uint8_t { kPublished, kPerExpert };

enum class TensorRole : uint8_t {
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnO,
  kMlpGate,
  kMlpUp,
  kMlpDown,
  kExpertGate,
  kExpertUp,
  kExpertDown,
  kRouter,
  kEmbed,
  kLmHead,
  kNorm,
  kOther,  // float parameters that stay float: convs, A_log / D / dt_bias, sinks, gates, biases
  // Linears of the newer families.
  kAttnQkv,       // fused [q; k; v] (phi3)
  kMlpGateUp,     // fused [gate; up] (phi3)
  kExpertGateUp,  // gpt_oss [E, hidden, 2·ffn] (gate/up interleaved), with its bias
  kSharedGate,    // shared experts
  kSharedUp,
  kSharedDown,
  kMlaQA,          // deepseek low-rank q: [q_lora, hidden]
  kMlaQB,          // [heads·(nope+rope), q_lora]
  kMlaKvA,         // [kv_lora + rope, hidden]
  kMlaKvB,         // [heads·(nope+v), kv_lora]
  kLinearAttnIn,   // Gated DeltaNet input projections (qkvz, ba / qkv, z, b, a)
  kLinearAttnOut,  // [hidden, v_heads·v_dim]
  kSsmIn,          // Mamba-2 in_proj [z | xBC | dt]
  kSsmOut,         // Mamba-2 out_proj
  kPerLayerInput,  // gemma4 per-layer input projections and their embedding table
};

// "attn_q", "attn_k", ..., "expert_down", "router", "embed", "lm_head", "norm", "other".
std::string_view TensorRoleName(TensorRole role);
// Linears of a decoder layer that TurboQuant quantizes (attention, MLP, experts; not the router).
bool IsDecoderLinear(TensorRole role);
bool IsExpert(TensorRole role);

// One tensor the loader reads.
struct ExpectedTensor {
  std::string name;  // full tensor name, e.g. "model.layers.3.self_attn.q_proj.weight"
  TensorRole role = TensorRole::kOther;
  int64_t layer = -1;   // -1: not in a decoder layer
  int64_t expert = -1;  // -1: not an expert
  bool is_bias = false;
  Shape shape;
  // False for tensors the loader can do without (lm_head.weight: falls back to the embedding).
  bool required = true;
};

// Every tensor Model::Load reads for this config, in load order, derived from the layer spec
// (layer_spec.h) and the architecture's names. The config-only overload (and TensorRoleMap's)
// goes through FindArchitecture: tq::Error for a model_type that is unknown or not runnable.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config,
                                            ExpertLayout layout = ExpertLayout::kPublished);
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config, const Architecture& arch,
                                            ExpertLayout layout = ExpertLayout::kPublished);

// The expert layout of a checkpoint's tensors: kPerExpert when it holds a tensor under the first
// MoE layer's first per-expert gate (or up) prefix of a fused-expert family, else kPublished.
ExpertLayout ExpertLayoutOf(const ModelConfig& config, const std::vector<TensorInfo>& tensors);

// Classifies tensor names of a checkpoint, original or converted: an exact expected name, or a
// name under an expected linear's module prefix ("<prefix>.weight", "<prefix>.bias",
// "<prefix>.codes", "<prefix>.scales", ... — what a converted checkpoint stores per linear).
class TensorRoleMap {
 public:
  explicit TensorRoleMap(const ModelConfig& config, ExpertLayout layout = ExpertLayout::kPublished);
  TensorRoleMap(const ModelConfig& config, const Architecture& arch,
                ExpertLayout layout = ExpertLayout::kPublished);
  // The map of a checkpoint's tensors, in their expert layout (ExpertLayoutOf).
  static TensorRoleMap Of(const ModelConfig& config, const std::vector<TensorInfo>& tensors);

  const std::vector<ExpectedTensor>& expected() const { return expected_; }
  // The expected tensor `name` is, or lives under (by module prefix); nullopt when unknown.
  std::optional<ExpectedTensor> Classify(std::string_view name) const;
  // The expected tensor with exactly this name, or nullptr.
  const ExpectedTensor* Find(std::string_view name) const;

 private:
  std::vector<ExpectedTensor> expected_;
  std::unordered_map<std::string, size_t> by_name_;    // exact tensor names
  std::unordered_map<std::string, size_t> by_prefix_;  // linear module prefixes -> the .weight
};

}  // namespace tq
