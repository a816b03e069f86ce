#include "model/architecture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

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

}  // namespace

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
