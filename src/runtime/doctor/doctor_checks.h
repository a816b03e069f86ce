// The checks of `doctor` (internal to runtime/doctor/). Each appends CheckResults; later checks
// use what earlier ones loaded and say "skipped" (warn) when it is missing.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "runtime/doctor/doctor.h"

namespace tq {

class Tokenizer;

struct DoctorState {
  DoctorOptions opts;
  std::vector<CheckResult>* out = nullptr;
  std::optional<ModelConfig> config;               // set when config.json is supported
  std::optional<std::vector<TensorInfo>> tensors;  // set when every header is valid
  std::unique_ptr<Tokenizer> tokenizer;

  void Add(CheckStatus s, std::string check, std::string hint) {
    out->push_back({s, std::move(check), std::move(hint)});
  }
};

void CheckFiles(DoctorState& st);            // files present, config.json supported
void CheckTensors(DoctorState& st);          // headers, names, shapes, dtypes
void CheckQuantization(DoctorState& st);     // the TurboQuant block and its tensors
void CheckQuantizationMap(DoctorState& st);  // every tensor against quantization.tensors
void CheckFileChecksums(DoctorState& st);    // shard sizes and CRC-32C vs quantization.files
void CheckExpertStreaming(DoctorState& st);  // MoE: every expert readable at its offset
// The tensors a converted checkpoint stores besides the config's roles (codes, scales, scale
// tables, sign vectors), from its quantization map; empty for a Hugging Face checkpoint.
std::set<std::string> QuantizationAuxTensors(const ModelConfig& config);
void CheckTokenizer(DoctorState& st);  // loads, round-trips; chat template renders
void CheckMachine(DoctorState& st);    // CPU, kernels, CUDA, memory vs plan

}  // namespace tq
