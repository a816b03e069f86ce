// doctor: every tensor of a TurboQuant checkpoint against the quantization map
// (config.json quantization.tensors, docs/FORMAT.md). The loader reads formats and group sizes
// from the tensors; the map records what the converter wrote. A mismatch between the two means
// the files were mixed, edited or written by something else (e.g. a converter run on an
// already-converted checkpoint), so each one is a failure naming the tensor:
//   - each map entry <p>: format known; shape [out, in]; .codes U8 [out, PackedBytes(format, in)];
//     .scales [out, in / group_size] of the dtype "scales" names (F16, or U8 for e8); the named
//     scale_table F32 [256]; the rotation group's .signs U8 [in / b, b / 8] for its block b.
//   - each .codes / .scales / .codebook / .mins tensor belongs to a map entry.
// CheckFileChecksums: each shard's size and CRC-32C against quantization.files (written by
// convert), so a byte modified anywhere, tensor data included, is found.
#include <fmt/format.h>

#include <map>
#include <set>

#include "core/error.h"
#include "io/crc32c.h"
#include "quant/format.h"
#include "quant/packing.h"
#include "runtime/doctor/doctor_checks.h"

namespace tq {
namespace {

using nlohmann::json;

const json* MapOf(const ModelConfig& config, json* storage) {
  try {
    *storage = json::parse(config.raw_json);
  } catch (const json::exception&) {
    return nullptr;
  }
  if (!storage->is_object() || !storage->contains("quantization")) return nullptr;
  const json& q = (*storage)["quantization"];
  if (!q.is_object() || !q.contains("tensors") || !q["tensors"].is_object()) return nullptr;
  return &q["tensors"];
}

std::string Str(const json& entry, const char* key) {
  return entry.contains(key) && entry[key].is_string() ? entry[key].get<std::string>() : "";
}

// "F16 [512, 8]".
std::string Describe(const TensorInfo& t) {
  return fmt::format("{} {}", DTypeName(t.dtype), ShapeToString(t.shape));
}

int64_t Int(const json& entry, const char* key) {
  return entry.contains(key) && entry[key].is_number_integer() ? entry[key].get<int64_t>() : -1;
}

// One map entry against the stored tensors; "" or the first mismatch.
std::string CheckEntry(const std::string& p, const json& e,
                       const std::map<std::string, const TensorInfo*>& present) {
  if (!e.is_object()) return fmt::format("tensors.{} is not an object", p);
  auto find = [&](const std::string& name) -> const TensorInfo* {
    const auto it = present.find(name);
    return it == present.end() ? nullptr : it->second;
  };
  const auto format = quant::FormatFromName(Str(e, "format"));
  if (!format)
    return fmt::format("tensors.{}.format '{}' is not a known format", p, Str(e, "format"));
  if (!e.contains("shape") || !e["shape"].is_array() || e["shape"].size() != 2 ||
      !e["shape"][0].is_number_integer() || !e["shape"][1].is_number_integer())
    return fmt::format("tensors.{}.shape is not [out, in]", p);
  const int64_t out = e["shape"][0].get<int64_t>(), in = e["shape"][1].get<int64_t>();
  const int64_t group = Int(e, "group_size");
  if (out <= 0 || in <= 0 || group <= 0 || in % group != 0)
    return fmt::format("tensors.{}: shape [{}, {}] with group_size {}", p, out, in, group);
  const TensorInfo* codes = find(p + ".codes");
  if (!codes) return fmt::format("{}.codes is missing (the map lists {})", p, p);
  const Shape want_codes = {out, int64_t(quant::PackedBytes(*format, in))};
  if (codes->dtype != DType::U8 || codes->shape != want_codes)
    return fmt::format("{}.codes is {} {}, the map's {} [{}, {}] needs U8 {}", p,
                       DTypeName(codes->dtype), ShapeToString(codes->shape),
                       quant::Traits(*format).name, out, in, ShapeToString(want_codes));
  const TensorInfo* scales = find(p + ".scales");
  const std::string scale_kind = Str(e, "scales").empty() ? "f16" : Str(e, "scales");
  const DType want_scale_dtype = scale_kind == "e8" ? DType::U8 : DType::F16;
  if (scale_kind != "f16" && scale_kind != "e8")
    return fmt::format("tensors.{}.scales '{}' is not f16 or e8", p, scale_kind);
  const Shape want_scales = {out, in / group};
  if (!scales || scales->dtype != want_scale_dtype || scales->shape != want_scales)
    return fmt::format("{}.scales is {}, the map's group_size {} ({} scales) needs {} {}", p,
                       scales ? Describe(*scales) : std::string("missing"), group, scale_kind,
                       DTypeName(want_scale_dtype), ShapeToString(want_scales));
  const std::string table = Str(e, "scale_table");
  if (scale_kind == "e8") {
    const std::string name = table.empty() ? p + ".scale_table" : table;
    const TensorInfo* t = find(name);
    if (!t || t->dtype != DType::F32 || t->shape != Shape{256})
      return fmt::format("{}: its scale table {} is {}", p, name,
                         t ? Describe(*t) + ", expected F32 [256]" : std::string("missing"));
  } else if (!table.empty()) {
    return fmt::format("tensors.{} names scale_table {} with f16 scales", p, table);
  }
  if (e.contains("rotation_group") && e["rotation_group"].is_string()) {
    const std::string group_name = e["rotation_group"].get<std::string>();
    const int64_t block = Int(e, "rotation_block");
    const TensorInfo* signs = find(group_name + ".signs");
    if (!signs) return fmt::format("{}: rotation group {} has no .signs tensor", p, group_name);
    if (block > 0) {
      const Shape want = {in / block, block / 8};
      if (block % 8 != 0 || in % block != 0 || signs->dtype != DType::U8 || signs->shape != want)
        return fmt::format("{}.signs is {} {}, the map's rotation_block {} for in = {} needs U8 {}",
                           group_name, DTypeName(signs->dtype), ShapeToString(signs->shape), block,
                           in, ShapeToString(want));
    }
  }
  return "";
}

}  // namespace

std::set<std::string> QuantizationAuxTensors(const ModelConfig& config) {
  std::set<std::string> names;
  json storage;
  const json* map = MapOf(config, &storage);
  if (!map) return names;
  for (const auto& [p, e] : map->items()) {
    if (!e.is_object()) continue;
    if (const std::string t = Str(e, "scale_table"); !t.empty()) names.insert(t);
    if (e.contains("rotation_group") && e["rotation_group"].is_string())
      names.insert(e["rotation_group"].get<std::string>() + ".signs");
    for (const char* suffix : {".codes", ".scales", ".codebook", ".mins", ".scale_table"})
      names.insert(p + suffix);
  }
  return names;
}

void CheckQuantizationMap(DoctorState& st) {
  if (!st.config || !st.tensors) return;
  json storage;
  const json* map = MapOf(*st.config, &storage);
  if (!map) {
    if (st.config->raw_json.find("\"quantization\"") != std::string::npos)
      st.Add(CheckStatus::kFail, "quantization map",
             "config.json quantization.tensors is missing or not an object");
    return;
  }
  std::map<std::string, const TensorInfo*> present;
  for (const TensorInfo& t : *st.tensors) present[t.name] = &t;
  std::vector<std::string> problems;
  for (const auto& [p, e] : map->items()) {
    if (std::string why = CheckEntry(p, e, present); !why.empty()) problems.push_back(why);
  }
  // Quantized-linear tensors the map does not list.
  for (const TensorInfo& t : *st.tensors) {
    for (const char* suffix : {".codes", ".scales", ".codebook", ".mins"}) {
      if (!t.name.ends_with(suffix)) continue;
      const std::string p = t.name.substr(0, t.name.size() - std::string_view(suffix).size());
      if (!map->contains(p))
        problems.push_back(fmt::format("{} is stored but the map has no entry {}", t.name, p));
    }
  }
  if (!problems.empty()) {
    st.Add(
        CheckStatus::kFail, "quantization map",
        fmt::format("{} mismatch(es) between the tensors and config.json's map: {}{}",
                    problems.size(), problems.front(),
                    problems.size() > 1 ? fmt::format(" (and {} more)", problems.size() - 1) : ""));
    return;
  }
  st.Add(CheckStatus::kOk, "quantization map",
         fmt::format("{} map entries match their tensors (format, shape, code bytes, scales, "
                     "group size, scale table, signs)",
                     map->size()));
}

}  // namespace tq

namespace tq {

void CheckFileChecksums(DoctorState& st) {
  if (!st.config) return;
  json raw;
  try {
    raw = json::parse(st.config->raw_json);
  } catch (const json::exception&) {
    return;
  }
  if (!raw.is_object() || !raw.contains("quantization") || !raw["quantization"].is_object())
    return;  // a Hugging Face checkpoint: nothing recorded
  const json& q = raw["quantization"];
  if (!q.contains("files")) {
    st.Add(CheckStatus::kOk, "checksums",
           "none recorded (converted before checksums were written): contents not verified");
    return;
  }
  if (!q["files"].is_object() || q["files"].empty()) {
    st.Add(CheckStatus::kFail, "checksums", "quantization.files is not an object of shards");
    return;
  }
  std::vector<std::string> problems;
  uint64_t total = 0;
  for (const auto& [name, e] : q["files"].items()) {
    if (name.find('/') != std::string::npos || name.starts_with(".")) {
      problems.push_back(fmt::format("'{}' is not a file name in the model directory", name));
      continue;
    }
    if (!e.is_object() || !e.contains("bytes") || !e["bytes"].is_number_unsigned() ||
        Str(e, "crc32c").empty()) {
      problems.push_back(fmt::format("{}: entry needs bytes and crc32c", name));
      continue;
    }
    const std::string path = st.opts.model_dir + "/" + name;
    uint64_t size = 0;
    uint32_t crc = 0;
    try {
      crc = Crc32cOfFile(path, &size);
    } catch (const Error& err) {
      problems.push_back(err.what());
      continue;
    }
    total += size;
    if (size != e["bytes"].get<uint64_t>()) {
      problems.push_back(
          fmt::format("{} is {} bytes, the converter wrote {} (truncated or "
                      "extended)",
                      name, size, e["bytes"].get<uint64_t>()));
    } else if (Crc32cHex(crc) != Str(e, "crc32c")) {
      problems.push_back(
          fmt::format("{} has CRC-32C {}, the converter wrote {} (modified or "
                      "corrupted)",
                      name, Crc32cHex(crc), Str(e, "crc32c")));
    }
  }
  if (!problems.empty()) {
    st.Add(
        CheckStatus::kFail, "checksums",
        fmt::format("{}{}", problems.front(),
                    problems.size() > 1 ? fmt::format(" (and {} more)", problems.size() - 1) : ""));
    return;
  }
  st.Add(CheckStatus::kOk, "checksums",
         fmt::format("{} shard(s), {} bytes: CRC-32C as written by convert", q["files"].size(),
                     total));
}

}  // namespace tq
