// `turboquant doctor`: read-only checks of a model directory and this machine, each a line
//   ok|warn|fail  <check>  <hint>
// Files present (config, weights, shards vs index, tokenizer files), config supported, tensors
// consistent with the config (names, shapes, dtypes; unexpected extras warn), the TurboQuant
// quantization block and per-tensor consistency, tokenizer loads and round-trips a sample, chat
// template renders, CPU features and kernel backend, CUDA device, free memory vs plan's verdict.
// Nothing is written; weights are never read (headers only).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tq {

enum class CheckStatus { kOk, kWarn, kFail };
const char* CheckStatusName(CheckStatus s);  // "ok", "warn", "fail"

struct CheckResult {
  CheckStatus status = CheckStatus::kOk;
  std::string check;  // "config.json", "tensors", "tokenizer", ...
  std::string hint;   // what was found, or what to do
};

struct DoctorOptions {
  std::string model_dir;
  int64_t context = 0;  // for the memory check; 0 = DefaultContextTokens (plan/memory_plan.h)
  std::optional<double> ram_gb;
};

struct DoctorReport {
  std::vector<CheckResult> checks;
  bool ok() const;  // no fail
  int Count(CheckStatus s) const;
};

DoctorReport RunDoctor(const DoctorOptions& opts);
std::string DoctorToText(const DoctorReport& report);
nlohmann::ordered_json DoctorToJson(const DoctorReport& report);

}  // namespace tq
