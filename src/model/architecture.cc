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

namespace {

// The registry: one line per architecture.
const std::vector<const Architecture*>& Registry() {
  static const std::vector<const Architecture*> all = {
      &LlamaArchitecture(), &MistralArchitecture(),  &Qwen2Architecture(),
      &Qwen3Architecture(), &Qwen3MoeArchitecture(), &MixtralArchitecture(),
  };
  return all;
}

}  // namespace

const Architecture& FindArchitecture(const std::string& model_type) {
  for (const Architecture* a : Registry())
    if (a->model_type == model_type) return *a;
  Fail("model", "unsupported model_type '{}' (supported: {})", model_type,
       fmt::join(ArchitectureNames(), ", "));
}

std::vector<std::string> ArchitectureNames() {
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
