#include "convert/convert.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "convert/budget.h"
#include "convert/calibration.h"
#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "core/sysinfo.h"
#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/model_config.h"
#include "model/packed_linear.h"
#include "model/source_tensors.h"
#include "quant/error_feedback.h"
#include "quant/group_quantizer.h"
#include "quant/hadamard.h"
#include "quant/packing.h"

namespace tq {
namespace fs = std::filesystem;
namespace {

// One tensor of the output: name, dtype, shape and (once produced) its bytes.
struct OutTensor {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  std::vector<uint8_t> bytes;
  size_t nbytes() const { return size_t(NumElements(shape)) * DTypeSize(dtype); }
};

template <typename T>
std::vector<uint8_t> AsBytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Removes the temp directory unless released (an exception or interruption leaves no model).
class TempDirGuard {
 public:
  explicit TempDirGuard(fs::path p) : path_(std::move(p)) {}
  ~TempDirGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void Release() { path_.clear(); }

 private:
  fs::path path_;
};

// Reads stored tensor bytes with pread (no mmap: in streaming mode only the current tensor is
// resident).
class ShardReader {
 public:
  explicit ShardReader(const std::vector<std::string>& shard_files) {
    for (const std::string& f : shard_files) {
      const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      TQ_CHECK(fd >= 0, "convert", "cannot open {}: {}", f, std::strerror(errno));
      fds_.push_back(fd);
      files_.push_back(f);
    }
  }
  ~ShardReader() {
    for (int fd : fds_) ::close(fd);
  }
  // Bytes [begin, begin + n) of tensor t.
  void ReadRange(const TensorInfo& t, uint64_t begin, uint64_t n, uint8_t* dst) const {
    TQ_CHECK(begin + n <= t.nbytes, "convert", "read past tensor '{}'", t.name);
    uint64_t done = 0;
    while (done < n) {
      const ssize_t r =
          ::pread(fds_.at(t.shard), dst + done, size_t(n - done), off_t(t.offset + begin + done));
      TQ_CHECK(r > 0, "convert", "reading tensor '{}' from {}: {}", t.name, files_.at(t.shard),
               r == 0 ? "unexpected end of file" : std::strerror(errno));
      done += uint64_t(r);
    }
  }

 private:
  std::vector<int> fds_;
  std::vector<std::string> files_;
};

quant::QuantSpec SpecFor(const TensorDecision& d, const ConvertOptions& o) {
  quant::QuantSpec s;
  s.method = o.recipe.method;
  s.format = *d.format;
  s.group_size = d.group_size;
  s.scale.mode = o.scale;
  s.scale_format = d.scale_format;
  // q8: the int8 grid (the int8 kernels read its codes without a lookup; quant/codebook.h).
  if (s.method == quant::QuantMethod::kCodebook && s.format == quant::CodeFormat::kQ8)
    s.codebook = &quant::LinearQ8Codebook();
  return s;
}

// The rotation of a group, generated once (the first member) and reused by the others.
class Rotations {
 public:
  explicit Rotations(uint64_t seed) : seed_(seed) {}
  // The rotation of d's group (made on first use).
  const quant::HadamardRotation* Get(const TensorDecision& d) {
    auto [it, fresh] = map_.try_emplace(d.rotation_group);
    if (fresh) {
      it->second = quant::HadamardRotation(
          quant::HadamardSigns::Generate(d.shape[1], RotationGroupSeed(seed_, d.rotation_group)),
          d.rotation_block);
    }
    TQ_CHECK(it->second.dim() == d.shape[1] && it->second.block() == d.rotation_block, "convert",
             "'{}' does not fit rotation group '{}'", d.name, d.rotation_group);
    return &it->second;
  }

 private:
  uint64_t seed_;
  std::map<std::string, quant::HadamardRotation> map_;
};

// Copies bytes [begin, begin + n) of the current source tensor to dst.
using ReadFn = std::function<void(uint64_t begin, uint64_t n, uint8_t* dst)>;

// Reads the rows of a tensor as W' = W Rᵀ in chunks of at most `chunk` rows: fn(r0, count, w).
void ForEachRotatedChunk(const TensorDecision& d, int64_t chunk_floats, const ReadFn& read,
                         const quant::HadamardRotation* rot,
                         const std::function<void(int64_t, int64_t, const float*)>& fn) {
  const int64_t rows = d.shape[0], cols = d.shape[1];
  const int64_t chunk = std::max<int64_t>(1, chunk_floats / cols);
  const uint64_t row_bytes = uint64_t(cols) * DTypeSize(d.dtype);
  std::vector<uint8_t> raw(size_t(std::min(rows, chunk)) * row_bytes);
  std::vector<float> w(size_t(std::min(rows, chunk) * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t count = std::min(chunk, rows - r0);
    read(uint64_t(r0) * row_bytes, uint64_t(count) * row_bytes, raw.data());
    ToF32(TensorView{raw.data(), d.dtype, {count, cols}}, w.data());
    if (rot) rot->ForwardRows(w.data(), count);
    fn(r0, count, w.data());
  }
}

// The output tensors of one source tensor (layout only when `read` is null). `table` is its e8
// scale table (e8 decisions with data); `table_first`: it writes the table tensor.
std::vector<OutTensor> OutputsOf(const TensorDecision& d, const ConvertOptions& o, bool signs_first,
                                 bool table_first, const ReadFn* read,
                                 const quant::HadamardRotation* rot,
                                 const quant::E8ScaleTable* table,
                                 const quant::ErrorFeedback* feedback = nullptr) {
  const bool data = read != nullptr;
  std::vector<OutTensor> outs;
  if (!d.quantize) {
    OutTensor t{d.name, d.dtype, d.shape, {}};
    if (data) {
      t.bytes.resize(t.nbytes());
      (*read)(0, t.bytes.size(), t.bytes.data());
    }
    outs.push_back(std::move(t));
    return outs;
  }
  const int64_t rows = d.shape[0], cols = d.shape[1];
  const std::string p = ModulePrefixOf(d.name);
  const bool affine = o.recipe.method == quant::QuantMethod::kAffine;
  const int64_t groups = cols / d.group_size;
  const bool e8 = d.scale_format == quant::ScaleFormat::kE8;
  quant::QuantizedMatrix q;
  if (data) {
    // In row chunks of at most o.chunk_floats fp32 values (rows are quantized independently), so
    // a large tensor (an embedding) never exists in fp32 as a whole.
    quant::QuantSpec spec = SpecFor(d, o);
    if (e8) {
      TQ_CHECK(table != nullptr, "convert", "no e8 scale table for '{}'", d.name);
      spec.e8_table = table;
    }
    ForEachRotatedChunk(
        d, o.chunk_floats, *read, rot, [&](int64_t r0, int64_t count, const float* w) {
          quant::QuantizedMatrix part = feedback ? feedback->Quantize(w, count, cols, spec, d.name)
                                                 : quant::Quantize(w, count, cols, spec, d.name);
          if (r0 == 0) {
            q = std::move(part);
            q.rows = rows;
            return;
          }
          q.codes.insert(q.codes.end(), part.codes.begin(), part.codes.end());
          q.scales.insert(q.scales.end(), part.scales.begin(), part.scales.end());
          q.scale_codes.insert(q.scale_codes.end(), part.scale_codes.begin(),
                               part.scale_codes.end());
          q.mins.insert(q.mins.end(), part.mins.begin(), part.mins.end());
        });
  }
  outs.push_back({p + ".codes",
                  DType::U8,
                  {rows, int64_t(quant::PackedBytes(*d.format, cols))},
                  std::move(q.codes)});
  if (e8) {
    outs.push_back({p + ".scales", DType::U8, {rows, groups}, std::move(q.scale_codes)});
    if (table_first) {
      OutTensor t{d.scale_table, DType::F32, {quant::kE8TableSize}, {}};
      if (data) t.bytes = AsBytes(q.scale_table);
      outs.push_back(std::move(t));
    }
  } else {
    outs.push_back({p + ".scales", DType::F16, {rows, groups}, AsBytes(q.scales)});
  }
  if (affine) {
    outs.push_back({p + ".mins", DType::F16, {rows, groups}, AsBytes(q.mins)});
  } else {
    outs.push_back(
        {p + ".codebook", DType::F32, {quant::Traits(*d.format).levels}, AsBytes(q.codebook)});
  }
  if (d.rotation_block > 0 && signs_first) {
    OutTensor s{RotationGroupName(d.rotation_group) + ".signs",
                DType::U8,
                {cols / d.rotation_block, d.rotation_block / 8},
                {}};
    if (rot) s.bytes = rot->signs().ToBits();
    outs.push_back(std::move(s));
  }
  return outs;
}

nlohmann::ordered_json QuantizationBlock(const ConvertOptions& o, const QuantRecipe& r,
                                         double linear_bpw,
                                         const std::map<std::string, double>& alpha,
                                         const CalibrationResult& calib) {
  const QuantRecipeOptions& ro = o.recipe;
  nlohmann::ordered_json q;
  q["mode"] = "turboquant";
  q["format_version"] = kPackedFormatVersion;
  q["method"] = ro.method == quant::QuantMethod::kAffine ? "affine" : "turboquant";
  q["bits"] = ro.bits;
  q["group_size"] = ro.group_size;
  q["rotation"] = std::string(RotationKindName(ro.rotation));
  q["seed"] = o.seed;
  q["scale"] = o.scale == quant::ScaleMode::kRms ? "rms" : "mse";
  q["scale_format"] = std::string(quant::ScaleFormatName(ro.scale_format));
  q["attn_bits"] = ro.attn_bits;
  q["mlp_bits"] = ro.mlp_bits;
  q["mlp_group_size"] = ro.mlp_group_size;
  q["ternary_experts"] = ro.ternary_experts;
  q["expert_down_bits"] = ro.expert_down_bits;
  q["protect_layers"] = ro.protect_layers;
  q["protect_bits"] = ro.protect_bits;
  q["embed_bits"] = ro.embed_bits;
  if (!ro.tensor_bits.empty()) q["tensor_bits"] = ro.tensor_bits;
  if (ro.max_hadamard_block != quant::kDefaultMaxHadamardBlock)
    q["max_rotation_block"] = ro.max_hadamard_block;
  if (o.target_bytes > 0) q["target_size_bytes"] = o.target_bytes;
  if (!alpha.empty()) {
    q["sensitivity"] = {
        {"sequences", o.sensitivity.sequences},
        {"tokens", o.sensitivity.tokens},
        {"noise", o.sensitivity.noise},
        {"seed", o.sensitivity.seed},
        {"text", o.sensitivity.text == SensitivityOptions::Text::kSelf ? "self" : "random"}};
  }
  if (o.self_calibrate_tokens > 0) {
    q["self_calibrate"] = {{"tokens", calib.tokens},
                           {"sequence_tokens", CalibrationOptions{}.sequence_tokens},
                           {"temperatures", kCalibrationTemperatures},
                           {"damp", o.calibration_damp},
                           {"scales", o.calibration_lazy_scales ? "lazy" : "before"},
                           {"linears", calib.moments.size()},
                           {"experts_pooled", calib.pooled_experts},
                           {"seconds", calib.seconds}};
  }
  if (o.budget_bpw > 0) q["budget_bpw"] = o.budget_bpw;
  if ((o.budget_bpw > 0 || o.target_bytes > 0) && alpha.empty()) {
    q["budget_sensitive"] = o.budget_sensitive_weight;
    q["budget_edge"] = o.budget_edge_weight > 0
                           ? o.budget_edge_weight
                           : DefaultEdgeLayerWeight(o.budget_bpw, ro.scale_format);
  }
  q["linear_bits_per_weight"] = linear_bpw;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const TensorDecision& d : r.tensors) {
    if (!d.quantize) continue;
    nlohmann::ordered_json t;
    t["format"] = std::string(quant::Traits(*d.format).name);
    t["shape"] = d.shape;
    t["group_size"] = d.group_size;
    t["scales"] = std::string(quant::ScaleFormatName(d.scale_format));
    if (!d.scale_table.empty()) t["scale_table"] = d.scale_table;
    if (d.rotation_block > 0) {
      t["rotation_group"] = RotationGroupName(d.rotation_group);
      t["rotation_block"] = d.rotation_block;
    } else {
      t["rotation_group"] = nullptr;
    }
    if (!d.note.empty()) t["note"] = d.note;
    if (const auto a = alpha.find(d.name); a != alpha.end()) t["sensitivity"] = a->second;
    tensors[ModulePrefixOf(d.name)] = std::move(t);
  }
  q["tensors"] = std::move(tensors);
  return q;
}

// The quantization_config methods whose tensors SourceTensors decodes (model/source_tensors.h).
bool IsDecodedHubQuantization(const std::string& method) {
  return method == "mxfp4" || method == "fp8";
}

// A source that is already quantized cannot be converted: its linears are codes, not weights.
// MXFP4 experts and block-scaled FP8 weights pass: SourceTensors decodes them (or says what is
// wrong with them).
void RefuseQuantizedSource(const std::string& dir, const ModelConfig& config,
                           const std::vector<TensorInfo>& infos) {
  nlohmann::json raw;
  try {
    raw = nlohmann::json::parse(config.raw_json);
  } catch (const nlohmann::json::exception&) {
  }
  if (raw.is_object() && raw.contains("quantization")) {
    throw UsageError(
        "--model " + dir,
        "is already a TurboQuant checkpoint (config.json has a 'quantization' block): convert "
        "its Hugging Face source instead (turboquant inspect shows how it was converted)");
  }
  if (raw.is_object() && raw.contains("quantization_config")) {
    const auto& qc = raw["quantization_config"];
    const std::string method =
        qc.is_object() && qc.contains("quant_method") && qc["quant_method"].is_string()
            ? qc["quant_method"].get<std::string>()
            : std::string("unknown");
    if (!IsDecodedHubQuantization(method))
      throw UsageError("--model " + dir,
                       fmt::format("is already quantized ({}, config.json quantization_config): "
                                   "convert needs the bf16/fp16/fp32 checkpoint (or a published "
                                   "MXFP4 / block-scaled FP8 one)",
                                   method));
  }
  for (const TensorInfo& t : infos) {
    if (t.name.ends_with(".codes") || t.name.ends_with(".signs") ||
        (t.name.ends_with(".weight") && t.shape.size() == 2 && t.dtype != DType::F32 &&
         t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F8_E4M3)) {
      throw UsageError("--model " + dir,
                       fmt::format("holds quantized tensors ({} is {} {}): convert needs the "
                                   "bf16/fp16/fp32 checkpoint",
                                   t.name, DTypeName(t.dtype), ShapeToString(t.shape)));
    }
  }
}

// Temp dirs ".<out>.tmp-convert-<pid>" of converts whose process is gone (killed: no cleanup ran).
void RemoveStaleTempDirs(const fs::path& out) {
  const std::string prefix = fmt::format(".{}.tmp-convert-", out.filename().string());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid <= 0 || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH)) {
      std::error_code rm;
      fs::remove_all(entry.path(), rm);
    }
  }
}

// Puts directory `fresh` at `target` (which exists) in one step: renameat2(RENAME_EXCHANGE), so
// a crash leaves either the old or the new model at `target`, never neither; `fresh` then holds
// the old one and is removed. Falls back to two renames where the filesystem cannot exchange.
void ReplaceDirectory(const fs::path& fresh, const fs::path& target) {
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    return;  // the caller's guard removes `fresh` (the old model)
  }
  const fs::path old = target.parent_path() /
                       fmt::format(".{}.old-convert-{}", target.filename().string(), ::getpid());
  fs::rename(target, old);
  fs::rename(fresh, target);
  std::error_code ec;
  fs::remove_all(old, ec);
}

bool IsCopiedFile(const std::string& name) {
  for (const char* prefix : {"tokenizer", "special_tokens_map", "vocab", "merges", "chat_template",
                             "added_tokens", "generation_config", "preprocessor_config"}) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

// Stored bits per weight of the decoder linears (kept ones at their source width).
double LinearBitsPerWeight(const QuantRecipe& r) {
  const quant::QuantMethod method = r.options.method;
  double bits = 0, weights = 0;
  for (const TensorDecision& d : r.tensors) {
    if (!IsDecoderLinear(d.role) || d.shape.size() != 2) continue;
    const double n = double(NumElements(d.shape));
    weights += n;
    if (d.quantize) {
      // Codes + scales (+ e8 table) (+ minimums); the codebook and shared signs are left out.
      bits +=
          LinearStoredBits(d.shape[0], d.shape[1], *d.format, d.group_size, method, d.scale_format);
    } else {
      bits += 8.0 * double(d.source_bytes);
    }
  }
  bits += ScaleTableBits(r.tensors);  // one per rotation group (e8 scales)
  return weights > 0 ? bits / weights : 0;
}

}  // namespace

std::map<std::string, double> ReadRecordedSensitivities(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(ReadFileToString(path));
  } catch (const nlohmann::json::exception& e) {
    Fail("convert", "--sensitivity-from {}: {}: {}", dir, path, e.what());
  }
  std::map<std::string, double> alpha;
  if (cfg.contains("quantization") && cfg["quantization"].contains("tensors") &&
      cfg["quantization"]["tensors"].is_object()) {
    for (const auto& [prefix, t] : cfg["quantization"]["tensors"].items())
      if (t.is_object() && t.contains("sensitivity") && t["sensitivity"].is_number())
        alpha[prefix + ".weight"] = t["sensitivity"].get<double>();
  }
  TQ_CHECK(!alpha.empty(), "convert",
           "--sensitivity-from {}: {} records no sensitivities (convert it with --target-size or "
           "--sensitivity measured)",
           dir, path);
  return alpha;
}

uint64_t RotationGroupSeed(uint64_t seed, const std::string& group) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char ch : group) h = (h ^ ch) * 0x100000001b3ull;
  return seed ^ h;
}

std::string RotationGroupName(const std::string& key) {
  std::string s = key;
  for (char& ch : s)
    if (ch == '/') ch = '.';
  return s;
}

std::string ModulePrefixOf(const std::string& name) {
  const std::string suffix = ".weight";
  return name.size() > suffix.size() && name.ends_with(suffix)
             ? name.substr(0, name.size() - suffix.size())
             : name;
}

ConvertSummary Convert(const ConvertOptions& o) {
  const Timer timer;
  ConvertSummary sum;
  TQ_CHECK(!o.model_dir.empty() && !o.out_dir.empty(), "convert", "--model and --out are needed");
  const fs::path out = fs::absolute(fs::path(o.out_dir)).lexically_normal();
  const fs::path src = fs::absolute(fs::path(o.model_dir)).lexically_normal();
  if (fs::exists(out) && !o.force)
    throw UsageError("--out " + o.out_dir, "already exists (use --force to replace it)");
  TQ_CHECK(out != src, "convert", "--out must differ from --model");

  if (o.self_calibrate_tokens != 0) {
    if (o.self_calibrate_tokens < kMinCalibrationTokens ||
        o.self_calibrate_tokens > kMaxCalibrationTokens)
      throw UsageError(fmt::format("--self-calibrate {}", o.self_calibrate_tokens),
                       fmt::format("the token count must be 0 (off) or in [{}, {}]",
                                   kMinCalibrationTokens, kMaxCalibrationTokens));
    if (o.recipe.method != quant::QuantMethod::kCodebook)
      throw UsageError("--self-calibrate",
                       "needs --method turboquant (error feedback rounds to "
                       "the codebook)");
    if (!(o.calibration_damp >= 0 && o.calibration_damp <= 10))
      throw UsageError(fmt::format("--calibration-damp {}", o.calibration_damp),
                       "must be in [0, 10]");
  }
  const ModelConfig config = LoadModelConfig(o.model_dir);
  std::vector<std::string> shard_files;
  const std::vector<TensorInfo> stored = Checkpoint::ReadHeaders(o.model_dir, &shard_files);
  RefuseQuantizedSource(o.model_dir, config, stored);
  // The tensors as converted: gpt_oss's fused / MXFP4 experts per expert, FP8 weights as fp32.
  const ShardReader shards(shard_files);
  const SourceReader reader(SourceTensors(config, stored), stored,
                            [&](size_t i, uint64_t begin, uint64_t n, uint8_t* dst) {
                              shards.ReadRange(stored[i], begin, n, dst);
                            });
  const std::vector<TensorInfo> infos = SourceInfos(reader.sources());
  // Measuring sensitivities and self-calibration run the source model, which loads only from
  // float weights.
  if (const SourceTensor* d = FirstDecodedSource(reader.sources());
      d && (o.self_calibrate_tokens > 0 || (o.measure_sensitivity && o.sensitivity_from.empty())))
    throw UsageError(
        o.self_calibrate_tokens > 0 ? "--self-calibrate" : "--sensitivity measured",
        fmt::format("runs the source model, and '{}' is decoded from {} at convert "
                    "(the model does not load as stored): use --sensitivity prior "
                    "(role / depth rules) without --self-calibrate",
                    d->info.name, d->kind == SourceTensor::Kind::kFp8Block ? "FP8" : "MXFP4"));
  RemoveStaleTempDirs(out);
  auto check_cancel = [&] {
    if (o.cancel && o.cancel->load()) Fail("convert", "interrupted by a signal; nothing written");
  };
  QuantRecipeOptions ropts = o.recipe;
  // A whole-file budget with measured sensitivities chooses the embedding / LM head itself: they
  // are planned at 8 bits (rotation, groups) and re-chosen by the allocator.
  if (o.target_bytes > 0 && o.measure_sensitivity && o.budget_embeddings) ropts.embed_bits = 8;
  QuantRecipe recipe = PlanQuantization(config, infos, ropts);
  std::map<std::string, double> alpha;  // measured sensitivities (empty: priors)
  if (o.budget_bpw > 0 || o.target_bytes > 0) {
    BudgetOptions bo;
    bo.target_bits = o.budget_bpw;
    bo.target_bytes = o.target_bytes;
    bo.embeddings = o.budget_embeddings;
    if (o.measure_sensitivity) {
      std::vector<size_t> which;
      for (size_t i = 0; i < recipe.tensors.size(); ++i) {
        const TensorDecision& d = recipe.tensors[i];
        if (d.quantize && (IsDecoderLinear(d.role) || d.role == TensorRole::kEmbed ||
                           d.role == TensorRole::kLmHead))
          which.push_back(i);
      }
      if (!o.sensitivity_from.empty()) {
        alpha = ReadRecordedSensitivities(o.sensitivity_from);
        for (size_t i : which)
          TQ_CHECK(alpha.count(recipe.tensors[i].name), "convert",
                   "--sensitivity-from {}: no sensitivity recorded for '{}'", o.sensitivity_from,
                   recipe.tensors[i].name);
      } else {
        SensitivityOptions so = o.sensitivity;
        so.rotation_seed = o.seed;
        so.progress = o.progress;
        for (const TensorSensitivity& t : MeasureSensitivity(
                 o.model_dir, recipe, which, so, [&](size_t i) { return reader.Read(i); }))
          alpha[t.name] = t.alpha;
      }
      bo.alpha = alpha;
    }
    bo.scale = o.scale;
    bo.seed = o.seed;
    bo.progress = o.progress;
    bo.objective = o.budget_per_weight ? BudgetOptions::Objective::kPerWeight
                                       : BudgetOptions::Objective::kPerTensor;
    bo.sensitive_weight = o.budget_sensitive_weight;
    bo.edge_layer_weight = o.budget_edge_weight;
    AllocateBitBudget(recipe, bo, [&](const TensorDecision& d) {
      return reader.Read(size_t(&d - recipe.tensors.data()));
    });
  }
  const double linear_bpw = LinearBitsPerWeight(recipe);
  Rotations rotations(o.seed);

  // Self-calibration: input moments of the linears as the allocator left them (their final
  // rotations), then one error-feedback factor per (input, rotation), shared by q/k/v etc.
  CalibrationResult calib;
  if (o.self_calibrate_tokens > 0) {
    CalibrationOptions co;
    co.tokens = o.self_calibrate_tokens;
    co.seed = o.seed;
    co.progress = o.progress;
    calib = SelfCalibrate(o.model_dir, recipe, co, [&](size_t i) { return reader.Read(i); });
  }
  std::map<std::tuple<const InputMoments*, std::string, int64_t>,
           std::shared_ptr<const quant::ErrorFeedback>>
      feedbacks;
  auto feedback_for = [&](const TensorDecision& d) -> std::shared_ptr<const quant::ErrorFeedback> {
    const auto m = calib.moments.find(d.name);
    if (m == calib.moments.end() || !d.quantize) return nullptr;
    const quant::HadamardRotation* rot = d.rotation_block > 0 ? rotations.Get(d) : nullptr;
    auto& f = feedbacks[{m->second.get(), d.rotation_group, d.rotation_block}];
    if (!f) {
      const std::vector<double> h = RotatedMoment(*m->second, rot);
      f = std::make_shared<const quant::ErrorFeedback>(
          h.data(), m->second->dim,
          quant::ErrorFeedbackOptions{o.calibration_damp, o.calibration_lazy_scales}, d.name);
    }
    return f;
  };

  // e8 scale tables: one per table group (the linears of a rotation group), from the range of the
  // group RMS values of all its members — a pass over those tensors before any is quantized.
  std::map<std::string, quant::GroupRmsRange> ranges;
  for (size_t i = 0; i < recipe.tensors.size(); ++i) {
    const TensorDecision& d = recipe.tensors[i];
    if (d.scale_table.empty()) continue;
    const quant::HadamardRotation* rot = d.rotation_block > 0 ? rotations.Get(d) : nullptr;
    quant::GroupRmsRange& range = ranges[d.scale_table];
    const ReadFn read = [&](uint64_t begin, uint64_t n, uint8_t* dst) {
      reader.ReadRange(i, begin, n, dst);
    };
    ForEachRotatedChunk(d, o.chunk_floats, read, rot, [&](int64_t, int64_t count, const float* w) {
      range.Add(w, count, d.shape[1], d.group_size);
    });
  }
  std::map<std::string, quant::E8ScaleTable> tables;
  for (const auto& [name, range] : ranges) tables[name] = range.Table();

  // Layout: every output tensor, assigned to shards in order before anything is computed.
  std::vector<std::vector<OutTensor>> layout;
  std::vector<char> signs_first, table_first;
  {
    std::set<std::string> seen_groups, seen_tables;
    for (const TensorDecision& d : recipe.tensors) {
      signs_first.push_back(d.rotation_block > 0 && seen_groups.insert(d.rotation_group).second);
      table_first.push_back(!d.scale_table.empty() && seen_tables.insert(d.scale_table).second);
      layout.push_back(
          OutputsOf(d, o, signs_first.back(), table_first.back(), nullptr, nullptr, nullptr));
    }
  }
  std::vector<int> shard_of(layout.size(), 0);
  {
    uint64_t in_shard = 0;
    int shard = 0;
    for (size_t i = 0; i < layout.size(); ++i) {
      uint64_t bytes = 0;
      for (const OutTensor& t : layout[i]) bytes += t.nbytes();
      if (in_shard > 0 && in_shard + bytes > o.shard_bytes) {
        ++shard;
        in_shard = 0;
      }
      in_shard += bytes;
      shard_of[i] = shard;
      sum.output_bytes += int64_t(bytes);
      sum.output_tensors += int64_t(layout[i].size());
    }
    sum.num_shards = shard + 1;
  }
  auto shard_name = [&](int s) {
    return sum.num_shards == 1
               ? std::string("model.safetensors")
               : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, sum.num_shards);
  };

  const fs::path tmp =
      out.parent_path() / fmt::format(".{}.tmp-convert-{}", out.filename().string(), ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  TempDirGuard guard(tmp);

  // In-memory mode reads the whole source first (the baseline streaming is measured against).
  std::vector<std::vector<uint8_t>> all_source;
  if (!o.streaming) {
    for (size_t i = 0; i < infos.size(); ++i) all_source.push_back(reader.Read(i));
  }

  ProgressBar bar("convert", int64_t(recipe.tensors.size()), o.progress);
  std::unique_ptr<SafetensorsWriter> writer;
  int open_shard = -1;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::vector<std::vector<OutTensor>> pending;  // in-memory mode: all outputs, then written
  auto open_writer = [&](int s) {
    if (writer) writer->Finish();
    writer = std::make_unique<SafetensorsWriter>(
        (tmp / shard_name(s)).string(), std::map<std::string, std::string>{{"format", "pt"}});
    for (size_t i = 0; i < layout.size(); ++i) {
      if (shard_of[i] != s) continue;
      for (const OutTensor& t : layout[i]) {
        writer->Declare(t.name, t.dtype, t.shape);
        weight_map[t.name] = shard_name(s);
      }
    }
    open_shard = s;
  };
  auto write = [&](size_t i, const std::vector<OutTensor>& outs) {
    if (shard_of[i] != open_shard) open_writer(shard_of[i]);
    for (size_t k = 0; k < outs.size(); ++k) {
      TQ_CHECK(outs[k].name == layout[i][k].name && outs[k].bytes.size() == layout[i][k].nbytes(),
               "convert", "output '{}' does not match its planned layout", outs[k].name);
      writer->WriteTensor(outs[k].name, outs[k].bytes.data(), outs[k].bytes.size());
    }
  };
  for (size_t i = 0; i < recipe.tensors.size(); ++i) {
    const TensorDecision& d = recipe.tensors[i];
    // Streaming: straight from the file, one row chunk at a time; else from the loaded source.
    const ReadFn read = [&](uint64_t begin, uint64_t n, uint8_t* dst) {
      if (o.streaming) {
        reader.ReadRange(i, begin, n, dst);
      } else {
        std::memcpy(dst, all_source[i].data() + begin, n);
      }
    };
    const quant::HadamardRotation* rot = nullptr;
    if (d.quantize && d.rotation_block > 0) rot = rotations.Get(d);
    const auto table = tables.find(d.scale_table);
    const std::shared_ptr<const quant::ErrorFeedback> feedback = feedback_for(d);
    std::vector<OutTensor> outs =
        OutputsOf(d, o, signs_first[i], table_first[i], &read, rot,
                  table == tables.end() ? nullptr : &table->second, feedback.get());
    if (!o.streaming) all_source[i] = {};
    if (d.quantize) ++sum.quantized_tensors;
    if (o.streaming) {
      write(i, outs);
    } else {
      pending.push_back(std::move(outs));
    }
    bar.Update(int64_t(i) + 1, d.name);
    check_cancel();
    if (o.fail_after_tensors >= 0 && int64_t(i) + 1 >= o.fail_after_tensors)
      Fail("convert", "interrupted after {} tensors (test hook)", i + 1);
  }
  for (size_t i = 0; i < pending.size(); ++i) write(i, pending[i]);
  if (writer) writer->Finish();
  bar.Finish();

  if (sum.num_shards > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", sum.output_bytes}};
    index["weight_map"] = std::move(weight_map);
    WriteFileAtomic((tmp / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(config.raw_json);
  cfg["quantization"] = QuantizationBlock(o, recipe, linear_bpw, alpha, calib);
  // A published MXFP4 / FP8 source: its quantization_config described the source's tensors, not
  // these; kept as "source_quantization" (as the turboquant-mlx import keeps theirs).
  if (cfg.contains("quantization_config")) {
    cfg["source_quantization"] = cfg["quantization_config"];
    cfg.erase("quantization_config");
  }
  // Size and CRC-32C of every shard, for doctor (a byte changed anywhere is found).
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  for (int s = 0; s < sum.num_shards; ++s) {
    uint64_t bytes = 0;
    const uint32_t crc = Crc32cOfFile((tmp / shard_name(s)).string(), &bytes);
    files[shard_name(s)] = {{"bytes", bytes}, {"crc32c", Crc32cHex(crc)}};
    sum.file_bytes += int64_t(bytes);
  }
  cfg["quantization"]["files"] = std::move(files);
  // The header estimate (budget.h) is an upper bound; a file over the target would be a bug.
  TQ_CHECK(o.target_bytes <= 0 || sum.file_bytes <= o.target_bytes, "convert",
           "--target-size {}: the files came to {} bytes (header estimate too small)",
           o.target_bytes, sum.file_bytes);
  WriteFileAtomic((tmp / "config.json").string(), cfg.dump(2) + "\n");
  for (const auto& entry : fs::directory_iterator(src)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && IsCopiedFile(name)) fs::copy_file(entry.path(), tmp / name);
  }

  check_cancel();
  if (fs::exists(out)) {  // --force: swap in one step, then remove the old model
    ReplaceDirectory(tmp, out);
  } else {
    fs::rename(tmp, out);
    guard.Release();
  }
  sum.source_tensors = int64_t(recipe.tensors.size());
  sum.linear_bits_per_weight = linear_bpw;
  sum.seconds = timer.Seconds();
  sum.peak_rss_bytes = PeakRssBytes();
  return sum;
}

}  // namespace tq
