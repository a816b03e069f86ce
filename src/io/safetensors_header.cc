// Parsing and validation of a safetensors header. Everything about the file layout is checked
// here, before any tensor data is touched, so a hostile file gives an error and never a read
// outside the mapping.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/safetensors.h"

namespace tq {
namespace {

std::string TensorWhere(const std::string& where, const std::string& name) {
  return fmt::format("{}: tensor '{}'", where, name);
}

std::string SupportedDTypeList() {
  std::string s;
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                  DType::I16, DType::I8, DType::U8, DType::U32, DType::BOOL, DType::F8_E4M3}) {
    if (!s.empty()) s += ", ";
    s += DTypeName(t);
  }
  return s;
}

// A non-negative JSON integer, or nullopt.
std::optional<uint64_t> AsUnsigned(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return uint64_t(j.get<int64_t>());
  return std::nullopt;
}

// SAX handler that records the first key seen twice at depth 1 (and builds nothing).
struct TopLevelKeys : nlohmann::json_sax<nlohmann::json> {
  int depth = 0;
  std::set<std::string> seen;
  std::string duplicate;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && duplicate.empty() && !seen.insert(k).second) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the DOM parse reported it already
  }
};

TensorInfo ParseEntry(const std::string& name, const nlohmann::json& e, uint64_t data_start,
                      uint64_t data_size, const std::string& where) {
  const std::string w = TensorWhere(where, name);
  if (!e.is_object()) Fail(w, "header entry is a {}, expected an object", e.type_name());
  TensorInfo info;
  info.name = name;

  const auto dt = e.find("dtype");
  if (dt == e.end()) Fail(w, "missing 'dtype'");
  if (!dt->is_string()) Fail(w, "'dtype' is a {}, expected a string", dt->type_name());
  const std::string& dname = dt->get_ref<const std::string&>();
  const auto parsed = ParseDType(dname);
  if (!parsed) Fail(w, "unsupported dtype '{}' (supported: {})", dname, SupportedDTypeList());
  info.dtype = *parsed;

  const auto sh = e.find("shape");
  if (sh == e.end()) Fail(w, "missing 'shape'");
  if (!sh->is_array()) Fail(w, "'shape' is a {}, expected an array", sh->type_name());
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    const auto v = AsUnsigned(d);
    if (!v || *v > uint64_t(INT64_MAX))
      Fail(w, "'shape' entries must be non-negative integers, got {}", d.dump());
    info.shape.push_back(int64_t(*v));
    if (__builtin_mul_overflow(numel, *v, &numel))
      Fail(w, "shape {} overflows 64 bits", sh->dump());
  }
  uint64_t expect_bytes = 0;
  if (__builtin_mul_overflow(numel, uint64_t(DTypeSize(info.dtype)), &expect_bytes))
    Fail(w, "shape {} x {} bytes overflows 64 bits", sh->dump(), DTypeSize(info.dtype));
  // Keep numel representable as int64 for TensorView::numel().
  if (numel > uint64_t(INT64_MAX)) Fail(w, "shape {} has too many elements", sh->dump());

  const auto off = e.find("data_offsets");
  if (off == e.end()) Fail(w, "missing 'data_offsets'");
  if (!off->is_array() || off->size() != 2)
    Fail(w, "'data_offsets' must be [begin, end], got {}", off->dump());
  const auto begin = AsUnsigned((*off)[0]);
  const auto end = AsUnsigned((*off)[1]);
  if (!begin || !end) Fail(w, "'data_offsets' must be non-negative integers, got {}", off->dump());
  if (*begin > *end) Fail(w, "data_offsets begin {} > end {}", *begin, *end);
  if (*end > data_size)
    Fail(w, "data_offsets [{}, {}] run past the data section ({} bytes; file truncated?)", *begin,
         *end, data_size);
  if (*end - *begin != expect_bytes)
    Fail(w, "shape {} x {} ({} bytes) does not match data_offsets [{}, {}] ({} bytes)",
         ShapeToString(info.shape), dname, expect_bytes, *begin, *end, *end - *begin);
  info.offset = data_start + *begin;
  info.nbytes = expect_bytes;
  return info;
}

}  // namespace

std::vector<TensorInfo> ParseSafetensorsHeader(const uint8_t* data, size_t available,
                                               uint64_t file_size, const std::string& where,
                                               std::map<std::string, std::string>* metadata) {
  if (file_size < 8 || available < 8)
    Fail(where, "file is {} bytes, too short for the 8-byte header length", file_size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];  // little-endian u64
  if (n > kSafetensorsMaxHeaderBytes)
    Fail(where, "header length {} exceeds the {} byte limit", n, kSafetensorsMaxHeaderBytes);
  if (n > file_size - 8)
    Fail(where, "header length {} runs past the end of the {}-byte file", n, file_size);
  if (available - 8 < n)
    Fail(where, "only {} of the {} header bytes are available", available - 8, n);
  if (n < 2) Fail(where, "header length {} is too small for a JSON object", n);

  // Parse, rejecting duplicate keys at the top level (two tensors of the same name). The DOM
  // parse keeps the last of duplicates silently, so a SAX pass finds them (nlohmann's parse with
  // a callback does this too but is quadratic: 25 s for the 18,867 tensors of Qwen3-30B-A3B).
  nlohmann::json j;
  const char* p = reinterpret_cast<const char*>(data + 8);
  try {
    j = nlohmann::json::parse(p, p + n);
  } catch (const nlohmann::json::exception& e) {
    Fail(where, "header is not valid JSON: {}", e.what());
  }
  TopLevelKeys keys;
  nlohmann::json::sax_parse(p, p + n, &keys);
  const std::string& dup = keys.duplicate;
  if (!j.is_object()) Fail(where, "header is a JSON {}, expected an object", j.type_name());
  if (!dup.empty()) Fail(TensorWhere(where, dup), "appears twice in the header");

  const uint64_t data_start = 8 + n;
  const uint64_t data_size = file_size - data_start;
  std::vector<TensorInfo> out;
  out.reserve(j.size());
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object())
        Fail(where, "'__metadata__' is a {}, expected an object of strings", value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          Fail(where, "'__metadata__' value of '{}' is a {}, expected a string", mk,
               mv.type_name());
        if (metadata) (*metadata)[mk] = mv.get<std::string>();
      }
      continue;
    }
    out.push_back(ParseEntry(key, value, data_start, data_size, where));
  }

  // File order, and no two non-empty byte ranges may overlap.
  std::sort(out.begin(), out.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  const TensorInfo* prev = nullptr;
  for (const auto& t : out) {
    if (t.nbytes == 0) continue;
    if (prev && t.offset < prev->offset + prev->nbytes)
      Fail(TensorWhere(where, t.name), "byte range [{}, {}) overlaps tensor '{}' [{}, {})",
           t.offset - data_start, t.offset - data_start + t.nbytes, prev->name,
           prev->offset - data_start, prev->offset - data_start + prev->nbytes);
    prev = &t;
  }
  return out;
}

}  // namespace tq
