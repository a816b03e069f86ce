// doctor: files present, config supported, tensors consistent with the config.
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/architecture.h"
#include "model/source_tensors.h"
#include "model/tensor_roles.h"
#include "runtime/doctor/doctor_checks.h"
#include "runtime/plan/plan_report.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

// "a, b, c and 4 more"
std::string FirstFew(const std::vector<std::string>& items, size_t n = 3) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < n; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > n) s += fmt::format(" and {} more", items.size() - n);
  return s;
}

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? -1 : int64_t(size);
}

bool IsFloatDType(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

}  // namespace

void CheckFiles(DoctorState& st) {
  const std::string& dir = st.opts.model_dir;
  if (!fs::is_directory(dir)) {
    st.Add(CheckStatus::kFail, "model dir", fmt::format("{}: no such directory", dir));
    return;
  }
  // config.json: present, parses, a supported model_type.
  const std::string config_path = dir + "/config.json";
  if (!fs::exists(config_path)) {
    st.Add(CheckStatus::kFail, "config.json", "missing: not a Hugging Face model directory?");
  } else {
    try {
      ModelConfig c = LoadModelConfig(dir);
      FindArchitecture(c.model_type);
      st.Add(CheckStatus::kOk, "config.json",
             fmt::format("{} ({}): {} layers, hidden {}, heads {}/{}, vocab {}{}", c.model_type,
                         c.architecture, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads,
                         c.vocab_size,
                         c.is_moe() ? fmt::format(", {} experts top-{}", c.num_experts,
                                                  c.num_experts_per_tok)
                                    : ""));
      st.config = std::move(c);
    } catch (const Error& e) {
      st.Add(CheckStatus::kFail, "config.json", e.what());
    }
  }
  // Weights: one file, or an index whose every shard exists and holds what it says.
  try {
    const std::vector<std::string> shards = Checkpoint::ShardFiles(dir);
    int64_t bytes = 0;
    for (const auto& s : shards) bytes += std::max<int64_t>(0, FileSize(s));
    st.Add(CheckStatus::kOk, "weights",
           shards.size() == 1 && fs::path(shards[0]).filename() == "model.safetensors"
               ? fmt::format("model.safetensors ({})", HumanBytes(bytes))
               : fmt::format("{} shards + model.safetensors.index.json ({})", shards.size(),
                             HumanBytes(bytes)));
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, "weights", e.what());
  }
  // Tokenizer files.
  if (fs::exists(dir + "/tokenizer.json")) {
    st.Add(CheckStatus::kOk, "tokenizer.json", HumanBytes(FileSize(dir + "/tokenizer.json")));
  } else {
    st.Add(CheckStatus::kFail, "tokenizer.json",
           "missing: generate and serve need it (copy it from the source checkpoint)");
  }
  if (fs::exists(dir + "/tokenizer_config.json")) {
    st.Add(CheckStatus::kOk, "tokenizer_config.json", "present");
  } else {
    st.Add(CheckStatus::kWarn, "tokenizer_config.json",
           "missing: no chat template (--chat unavailable), default special-token settings");
  }
  if (!fs::exists(dir + "/generation_config.json")) {
    st.Add(CheckStatus::kWarn, "generation_config.json",
           "missing: sampling defaults and config.json's eos ids apply");
  } else {
    try {
      const GenerationConfig g = LoadGenerationConfig(dir);
      std::string hint = fmt::format("eos ids [{}]", fmt::join(g.eos_token_ids, ", "));
      if (g.temperature) hint += fmt::format(", temperature {}", *g.temperature);
      st.Add(CheckStatus::kOk, "generation_config.json", hint);
    } catch (const Error& e) {
      st.Add(CheckStatus::kFail, "generation_config.json", e.what());
    }
  }
}

void CheckTensors(DoctorState& st) {
  const std::string& dir = st.opts.model_dir;
  std::vector<std::string> shard_files;
  try {
    st.tensors = Checkpoint::ReadHeaders(dir, &shard_files);
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, "safetensors headers", e.what());
    return;
  }
  int64_t bytes = 0;
  for (const auto& t : *st.tensors) bytes += int64_t(t.nbytes);
  st.Add(CheckStatus::kOk, "safetensors headers",
         fmt::format("{} tensors in {} file(s), {}; every range inside its file",
                     st.tensors->size(), shard_files.size(), HumanBytes(bytes)));
  if (!st.config) {
    st.Add(CheckStatus::kWarn, "tensors", "skipped: needs a supported config.json");
    return;
  }
  const ModelConfig& c = *st.config;
  const bool converted = c.raw_json.find("\"quantization\"") != std::string::npos;
  // A published MXFP4 / FP8 checkpoint is checked as the floats convert reads from it.
  std::vector<TensorInfo> tensors = *st.tensors;
  if (!converted) {
    try {
      const std::vector<SourceTensor> sources = SourceTensors(c, tensors);
      if (const SourceTensor* d = FirstDecodedSource(sources)) {
        st.Add(CheckStatus::kWarn, "hub layout",
               fmt::format("'{}' is stored as {}: convert reads it, generate / perplexity / "
                           "serve need the converted checkpoint",
                           d->info.name,
                           d->kind == SourceTensor::Kind::kFp8Block ? "FP8 E4M3 with block scales"
                                                                    : "MXFP4"));
        tensors = SourceInfos(sources);
      }
    } catch (const Error& e) {
      st.Add(CheckStatus::kFail, "hub layout", e.what());
    }
  }
  const TensorRoleMap roles = TensorRoleMap::Of(c, tensors);
  std::map<std::string, const TensorInfo*> present;
  std::set<std::string> prefixes_with_tensors;  // module prefixes something is stored under
  std::vector<std::string> unknown, bad_shape, bad_dtype, missing;
  int64_t matched = 0;
  // Sign vectors and shared scale tables have no role; the quantization map names them.
  const std::set<std::string> aux = QuantizationAuxTensors(c);
  for (const TensorInfo& t : tensors) {
    present[t.name] = &t;
    const auto e = roles.Classify(t.name);
    if (!e) {
      if (!aux.count(t.name)) unknown.push_back(t.name);
    } else if (!roles.Find(t.name)) {
      prefixes_with_tensors.insert(e->name.substr(0, e->name.size() - 7));  // minus ".weight"
    }
  }
  for (const ExpectedTensor& e : roles.expected()) {
    const auto it = present.find(e.name);
    if (it == present.end()) {
      // A converted checkpoint stores a quantized linear as other tensors under its prefix
      // (checked by CheckQuantization).
      const bool quantized = converted && e.name.ends_with(".weight") &&
                             prefixes_with_tensors.count(e.name.substr(0, e.name.size() - 7));
      if (e.required && !quantized) missing.push_back(e.name);
      continue;
    }
    const TensorInfo& t = *it->second;
    ++matched;
    if (t.shape != e.shape)
      bad_shape.push_back(fmt::format("{} is {}, expected {}", e.name, ShapeToString(t.shape),
                                      ShapeToString(e.shape)));
    if (!IsFloatDType(t.dtype))
      bad_dtype.push_back(fmt::format("{} is {}", e.name, DTypeName(t.dtype)));
  }
  const std::string arch = c.model_type;
  if (!missing.empty())
    st.Add(CheckStatus::kFail, "tensors",
           fmt::format("{} expected tensor(s) missing: {}", missing.size(), FirstFew(missing)));
  if (!bad_shape.empty())
    st.Add(CheckStatus::kFail, "tensor shapes",
           fmt::format("{} tensor(s) do not match config.json: {}", bad_shape.size(),
                       FirstFew(bad_shape, 2)));
  if (!bad_dtype.empty())
    st.Add(CheckStatus::kFail, "tensor dtypes",
           fmt::format("expected F32/F16/BF16: {}", FirstFew(bad_dtype)));
  if (!unknown.empty())
    st.Add(CheckStatus::kWarn, "extra tensors",
           fmt::format("{} tensor(s) the {} loader does not read: {}", unknown.size(), arch,
                       FirstFew(unknown)));
  if (missing.empty() && bad_shape.empty() && bad_dtype.empty())
    st.Add(CheckStatus::kOk, "tensors",
           fmt::format("{} expected tensors present with the shapes and dtypes of config.json",
                       matched));
  const bool has_head = std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) {
    const auto e = roles.Classify(t.name);
    return e && e->role == TensorRole::kLmHead;
  });
  if (!c.tie_word_embeddings && !has_head)
    st.Add(CheckStatus::kWarn, "lm_head",
           "tie_word_embeddings is false but there is no LM head: the embedding is used (as "
           "Hugging Face does)");
}

}  // namespace tq
