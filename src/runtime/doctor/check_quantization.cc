// doctor: the `quantization` block of a TurboQuant checkpoint (DESIGN.md §5, docs/FORMAT.md) and
// the consistency of each quantized linear's tensors.
//
// A quantized linear at module prefix <p> (weight [out, in]) is stored as
//   <p>.codes     U8  [out, PackedBytes(format, in)]   packed codes, rows independent
//   <p>.scales    F16 [out, in / group]                 one scale per group, or
//                 U8  [out, in / group]                 e8 codes (format 2), with a table F32 [256]
//                                                       (tensors.<p>.scale_table names it)
//   <p>.codebook  F32 [levels]                          (codebook method) levels -> format
//   <p>.mins      F16 [out, in / group]                 (affine method) group minimums
// The bit width comes from the tensors themselves (codebook length, code row bytes), never from
// the block's defaults.
#include <map>
#include <set>

#include "core/error.h"
#include "model/packed_linear.h"
#include "model/tensor_roles.h"
#include "quant/format.h"
#include "quant/packing.h"
#include "runtime/doctor/doctor_checks.h"

namespace tq {
namespace {

const std::set<std::string>& KnownKeys() {
  static const std::set<std::string> keys = {"mode",
                                             "format_version",
                                             "method",
                                             "bits",
                                             "group_size",
                                             "rotation",
                                             "seed",
                                             "attn_bits",
                                             "mlp_bits",
                                             "mlp_group_size",
                                             "ternary_experts",
                                             "expert_down_bits",
                                             "protect_layers",
                                             "protect_bits",
                                             "embed_bits",
                                             "scale",
                                             "scale_format",
                                             "tensor_bits",
                                             "max_rotation_block",
                                             "budget_bpw",
                                             "budget_sensitive",
                                             "budget_edge",
                                             "linear_bits_per_weight",
                                             "max_hadamard_block",
                                             "layers",
                                             "tensors",
                                             "converter",
                                             "files",
                                             "source",
                                             "imported_from",     // turboquant-mlx import
                                             "dropped_tensors"};  // (io/tqmlx_import.h)
  return keys;
}

// Checks the tensors of one quantized linear; returns "" or what is wrong.
std::string CheckQuantizedLinear(const std::string& prefix, const Shape& weight_shape,
                                 const std::map<std::string, const TensorInfo*>& present,
                                 const std::string& table_name, std::string* format_name) {
  auto find = [&](const char* suffix) -> const TensorInfo* {
    const auto it = present.find(prefix + suffix);
    return it == present.end() ? nullptr : it->second;
  };
  const TensorInfo* codes = find(".codes");
  const TensorInfo* scales = find(".scales");
  const TensorInfo* codebook = find(".codebook");
  const TensorInfo* mins = find(".mins");
  if (!codes) return fmt::format("{}: neither .weight nor .codes", prefix);
  if (!scales) return fmt::format("{}.scales missing", prefix);
  const int64_t out = weight_shape[0], in = weight_shape[1];
  std::optional<quant::CodeFormat> format;
  if (codebook) {
    if (codebook->shape.size() != 1 || codebook->dtype != DType::F32)
      return fmt::format("{}.codebook is {} {}, expected F32 [levels]", prefix,
                         DTypeName(codebook->dtype), ShapeToString(codebook->shape));
    format = quant::FormatForLevels(int(codebook->shape[0]));
    if (!format)
      return fmt::format("{}.codebook has {} levels: no code format has that many", prefix,
                         codebook->shape[0]);
  } else if (mins) {
    // Affine: the format from the code row bytes.
    for (int bits : {2, 3, 4, 8})
      if (codes->shape.size() == 2 &&
          codes->shape[1] == int64_t(quant::PackedBytes(*quant::FormatForBits(bits), in)))
        format = quant::FormatForBits(bits);
    if (!format)
      return fmt::format("{}.codes {}: no format packs {} codes in that row", prefix,
                         ShapeToString(codes->shape), in);
  } else {
    return fmt::format("{}: neither .codebook nor .mins", prefix);
  }
  *format_name = std::string(quant::Traits(*format).name);
  const Shape want_codes = {out, int64_t(quant::PackedBytes(*format, in))};
  if (codes->dtype != DType::U8 || codes->shape != want_codes)
    return fmt::format("{}.codes is {} {}, expected U8 {} for {} [{}, {}]", prefix,
                       DTypeName(codes->dtype), ShapeToString(codes->shape),
                       ShapeToString(want_codes), *format_name, out, in);
  const bool e8 = scales->dtype == DType::U8;
  if ((scales->dtype != DType::F16 && !e8) || scales->shape.size() != 2 ||
      scales->shape[0] != out || scales->shape[1] <= 0 || in % scales->shape[1] != 0)
    return fmt::format("{}.scales is {} {}, expected F16 or U8 (e8) [{}, {} / group]", prefix,
                       DTypeName(scales->dtype), ShapeToString(scales->shape), out, in);
  const auto table_it = present.find(table_name);
  const TensorInfo* table = table_it == present.end() ? nullptr : table_it->second;
  if (e8 && (!table || table->dtype != DType::F32 || table->shape != Shape{256} || mins))
    return fmt::format("{}.scales is U8 (e8) but {}", prefix,
                       mins     ? "the method is affine"
                       : !table ? ".scale_table is missing"
                                : ".scale_table is not F32 [256]");
  if (!e8 && find(".scale_table")) return fmt::format("{}.scale_table with F16 scales", prefix);
  if (e8) *format_name += " e8";
  if (mins && (mins->dtype != DType::F16 || mins->shape != scales->shape))
    return fmt::format("{}.mins is {} {}, expected F16 {}", prefix, DTypeName(mins->dtype),
                       ShapeToString(mins->shape), ShapeToString(scales->shape));
  return "";
}

}  // namespace

void CheckQuantization(DoctorState& st) {
  if (!st.config) return;
  nlohmann::json raw;
  try {
    raw = nlohmann::json::parse(st.config->raw_json);
  } catch (const nlohmann::json::exception& e) {
    return;  // config.json parsed before; not reached
  }
  if (!raw.contains("quantization")) {
    st.Add(CheckStatus::kOk, "quantization", "none: Hugging Face weights as stored");
    return;
  }
  const nlohmann::json& q = raw["quantization"];
  if (!q.is_object()) {
    st.Add(CheckStatus::kFail, "quantization", "config.json 'quantization' is not an object");
    return;
  }
  const std::string mode = q.value("mode", "");
  if (mode != "turboquant") {
    st.Add(CheckStatus::kFail, "quantization",
           fmt::format("mode '{}' is not 'turboquant' (another tool's quantization?)", mode));
    return;
  }
  if (!q.contains("format_version") || !q["format_version"].is_number_integer()) {
    st.Add(CheckStatus::kFail, "format version",
           "quantization.format_version missing or not an integer");
    return;
  }
  const int64_t version = q["format_version"].get<int64_t>();
  if (version < kOldestPackedFormatVersion || version > kPackedFormatVersion) {
    st.Add(CheckStatus::kFail, "format version",
           fmt::format("format_version {} (this build reads {}-{}): convert again or update",
                       version, kOldestPackedFormatVersion, kPackedFormatVersion));
    return;
  }
  st.Add(CheckStatus::kOk, "format version", fmt::format("TurboQuant format {}", version));
  std::vector<std::string> unknown;
  for (const auto& [key, value] : q.items())
    if (!KnownKeys().count(key)) unknown.push_back(key);
  if (!unknown.empty())
    st.Add(CheckStatus::kWarn, "quantization keys",
           fmt::format("unknown keys (ignored): {}", fmt::join(unknown, ", ")));

  if (!st.tensors) return;
  std::map<std::string, const TensorInfo*> present;
  for (const TensorInfo& t : *st.tensors) present[t.name] = &t;
  const TensorRoleMap roles = TensorRoleMap::Of(*st.config, *st.tensors);
  std::map<std::string, int> formats;  // format name -> linears
  std::vector<std::string> problems;
  int64_t dense = 0;
  for (const ExpectedTensor& e : roles.expected()) {
    const bool linear =
        IsDecoderLinear(e.role) || e.role == TensorRole::kEmbed || e.role == TensorRole::kLmHead;
    if (!linear || e.is_bias || !e.name.ends_with(".weight")) continue;
    if (present.count(e.name)) {
      ++dense;
      continue;
    }
    const std::string prefix = e.name.substr(0, e.name.size() - 7);
    const bool any = present.count(prefix + ".codes") || present.count(prefix + ".scales");
    if (!any && !e.required) continue;  // an absent (tied) LM head
    std::string format, table = prefix + ".scale_table";
    if (q.contains("tensors") && q["tensors"].is_object() && q["tensors"].contains(prefix) &&
        q["tensors"][prefix].is_object() && q["tensors"][prefix].contains("scale_table") &&
        q["tensors"][prefix]["scale_table"].is_string())
      table = q["tensors"][prefix]["scale_table"].get<std::string>();
    const std::string problem = CheckQuantizedLinear(prefix, e.shape, present, table, &format);
    if (problem.empty()) {
      ++formats[format];
    } else {
      problems.push_back(problem);
    }
  }
  if (!problems.empty()) {
    st.Add(
        CheckStatus::kFail, "quantized tensors",
        fmt::format("{} linear(s) inconsistent: {}{}", problems.size(), problems.front(),
                    problems.size() > 1 ? fmt::format(" (and {} more)", problems.size() - 1) : ""));
    return;
  }
  std::string summary;
  for (const auto& [name, n] : formats)
    summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, name);
  st.Add(CheckStatus::kOk, "quantized tensors",
         fmt::format(
             "{} quantized linear(s) consistent ({}), {} kept as stored",
             [&] {
               int n = 0;
               for (const auto& [k, v] : formats) n += v;
               return n;
             }(),
             summary.empty() ? "none" : summary, dense));
}

}  // namespace tq
