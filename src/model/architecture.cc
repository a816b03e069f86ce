#include "model/architecture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "io/model_config.h"

namespace tq {

const Architecture& LlamaArchitecture();
const Architecture& MistralArchitecture();
const Architecture& Qwen2Architecture();
const Architecture& Qwen3Architecture();
const Architecture& Qwen3MoeArchitecture();
const Architecture& MixtralArchitecture();
const Architecture& Gemma2Architecture();
const Architecture& Gemma3TextArchitecture();
const Architecture& Gemma4TextArchitecture();
const Architecture& Phi3Architecture();
const Architecture& Qwen2MoeArchitecture();
const Architecture& GptOssArchitecture();
const Architecture& Qwen3NextArchitecture();
const Architecture& Qwen35TextArchitecture();
const Architecture& Qwen35MoeTextArchitecture();
const Architecture& NemotronHArchitecture();
const Architecture& DeepseekV2Architecture();
const Architecture& DeepseekV3Architecture();

namespace {

// The registry: one line per architecture.
const std::vector<const Architecture*>& Registry() {
  static const std::vector<const Architecture*> all = {
      &LlamaArchitecture(),
      &MistralArchitecture(),
      &Qwen2Architecture(),
      &Qwen3Architecture(),
      &Qwen3MoeArchitecture(),
      &MixtralArchitecture(),
      // Families with a layer spec and tensor names, not run by forward.cc yet (runnable=false).
      &Gemma2Architecture(),
      &Gemma3TextArchitecture(),
      &Gemma4TextArchitecture(),
      &Phi3Architecture(),
      &Qwen2MoeArchitecture(),
      &GptOssArchitecture(),
      &Qwen3NextArchitecture(),
      &Qwen35TextArchitecture(),
      &Qwen35MoeTextArchitecture(),
      &NemotronHArchitecture(),
      &DeepseekV2Architecture(),
      &DeepseekV3Architecture(),
  };
  return all;
}

// Every tensor name of ArchTensorNames (for the multimodal wrappers' renaming).
using N = ArchTensorNames;
constexpr std::string N::*kAllNames[] = {&N::embed,
                                         &N::final_norm,
                                         &N::lm_head,
                                         &N::attn_norm,
                                         &N::ffn_norm,
                                         &N::q,
                                         &N::k,
                                         &N::v,
                                         &N::o,
                                         &N::q_norm,
                                         &N::k_norm,
                                         &N::gate,
                                         &N::up,
                                         &N::down,
                                         &N::router,
                                         &N::expert_gate,
                                         &N::expert_up,
                                         &N::expert_down,
                                         &N::post_attn_norm,
                                         &N::post_ffn_norm,
                                         &N::qkv,
                                         &N::gate_up,
                                         &N::sinks,
                                         &N::shared_gate,
                                         &N::shared_up,
                                         &N::shared_down,
                                         &N::shared_expert_gate,
                                         &N::router_correction_bias,
                                         &N::experts_gate_up,
                                         &N::experts_down,
                                         &N::mla_q_a,
                                         &N::mla_q_a_norm,
                                         &N::mla_q_b,
                                         &N::mla_kv_a,
                                         &N::mla_kv_a_norm,
                                         &N::mla_kv_b,
                                         &N::dn_qkvz,
                                         &N::dn_ba,
                                         &N::dn_qkv,
                                         &N::dn_z,
                                         &N::dn_b,
                                         &N::dn_a,
                                         &N::dn_conv,
                                         &N::dn_a_log,
                                         &N::dn_dt_bias,
                                         &N::dn_norm,
                                         &N::dn_out,
                                         &N::ssm_in,
                                         &N::ssm_conv,
                                         &N::ssm_a_log,
                                         &N::ssm_d,
                                         &N::ssm_dt_bias,
                                         &N::ssm_norm,
                                         &N::ssm_out,
                                         &N::ple_embed,
                                         &N::ple_model_proj,
                                         &N::ple_proj_norm,
                                         &N::ple_gate,
                                         &N::ple_proj,
                                         &N::ple_post_norm,
                                         &N::layer_scalar};
static_assert(sizeof(kAllNames) / sizeof(kAllNames[0]) * sizeof(std::string) == sizeof(N),
              "kAllNames must list every ArchTensorNames member");

}  // namespace

const Architecture& FindArchitecture(const ModelConfig& config) {
  const Architecture& a = FindArchitecture(config.model_type);
  if (config.wrapper_model_type.empty()) return a;
  // A multimodal wrapper (qwen3_5, gemma3, ...): the text model's tensors are under
  // model.language_model. (the LM head stays at the top level).
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Architecture>> wrapped;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Architecture>& w = wrapped[a.model_type];
  if (!w) {
    w = std::make_unique<Architecture>(a);
    const std::string from = "model.", to = "model.language_model.";
    for (std::string N::*m : kAllNames) {
      std::string& name = w->names.*m;
      if (name.starts_with(from)) name = to + name.substr(from.size());
    }
  }
  return *w;
}

const Architecture& FindFamily(const std::string& model_type) {
  for (const Architecture* a : Registry())
    if (a->model_type == model_type) return *a;
  Fail("model", "unsupported model_type '{}' (supported: {})", model_type,
       fmt::join(ArchitectureNames(), ", "));
}

const Architecture& FindArchitecture(const std::string& model_type) {
  const Architecture& a = FindFamily(model_type);
  if (!a.runnable)
    Fail("model",
         "model_type '{}' is recognised (config, layer spec, tensor names) but its forward pass "
         "is not implemented yet (supported: {})",
         model_type, fmt::join(ArchitectureNames(), ", "));
  return a;
}

std::vector<std::string> ArchitectureNames() {
  std::vector<std::string> names;
  for (const Architecture* a : Registry())
    if (a->runnable) names.push_back(a->model_type);
  return names;
}

std::vector<std::string> FamilyNames() {
  std::vector<std::string> names;
  for (const Architecture* a : Registry()) names.push_back(a->model_type);
  return names;
}

std::string TensorName(const std::string& pattern, int64_t layer, int64_t expert) {
  std::string s = pattern;
  for (auto [key, value] : {std::pair{std::string("{L}"), layer}, {std::string("{E}"), expert}}) {
    for (size_t p = s.find(key); p != std::string::npos; p = s.find(key))
      s.replace(p, key.size(), std::to_string(value));
  }
  return s;
}

}  // namespace tq
