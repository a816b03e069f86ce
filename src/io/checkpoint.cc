// Hugging Face weight layout of a model directory: model.safetensors, or shards named by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/json_fields.h"
#include "io/tqmlx_import.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

struct Layout {
  std::vector<std::string> files;            // full paths, sorted
  std::map<std::string, size_t> weight_map;  // from the index (empty for a single file)
};

std::string DirWhere(const std::string& dir) { return "checkpoint " + dir; }

// What the directory holds, for the "no weights found" error.
std::string ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  if (names.empty()) return "the directory is empty";
  std::string s = "found: ";
  for (size_t i = 0; i < names.size() && i < 20; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 20) s += fmt::format(", ... ({} entries)", names.size());
  return s;
}

Layout Resolve(const std::string& dir) {
  const std::string where = DirWhere(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) Fail(where, "not a directory");
  Layout out;
  const fs::path index_path = fs::path(dir) / kIndex;
  if (fs::exists(index_path, ec)) {
    const std::string iwhere = "checkpoint index " + index_path.string();
    const nlohmann::json j = ParseJson(ReadFileToString(index_path.string()), iwhere);
    const JsonFields f(j, iwhere);
    const auto* wm = f.Get("weight_map");
    if (!wm) f.FailField("weight_map", "required but missing");
    if (!wm->is_object() || wm->empty())
      f.FailField("weight_map", "expected a non-empty object {tensor: shard file}");
    std::map<std::string, size_t> shard_ids;  // file name -> position in `files`
    std::map<std::string, std::string> by_name;
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string())
        f.FailField("weight_map",
                    fmt::format("tensor '{}' maps to {}, expected a file name", name, file.dump()));
      const std::string fn = file.get<std::string>();
      if (fn.empty() || fn == "." || fn == ".." || fn.find('/') != std::string::npos ||
          fn.find('\\') != std::string::npos)
        f.FailField("weight_map",
                    fmt::format("tensor '{}' maps to '{}', not a plain file name", name, fn));
      shard_ids[fn] = 0;
      by_name[name] = fn;
    }
    for (auto& [fn, id] : shard_ids) {
      const fs::path p = fs::path(dir) / fn;
      if (!fs::is_regular_file(p, ec)) Fail(where, "shard '{}' named by {} is missing", fn, kIndex);
      id = out.files.size();
      out.files.push_back(p.string());
    }
    for (const auto& [name, fn] : by_name) out.weight_map[name] = shard_ids[fn];
    return out;
  }
  const fs::path single = fs::path(dir) / kSingle;
  if (fs::exists(single, ec)) {
    out.files.push_back(single.string());
    return out;
  }
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") found.push_back(e.path().filename());
  std::sort(found.begin(), found.end());
  if (!found.empty()) {
    std::string list;
    for (const auto& n : found) list += (list.empty() ? "" : ", ") + n;
    Fail(where, "{} .safetensors file(s) ({}) but no {} naming the shards, and no {}", found.size(),
         list, kIndex, kSingle);
  }
  Fail(where, "no {} or {} ({})", kSingle, kIndex, ListDir(dir));
}

// Every tensor name in exactly one shard; every indexed tensor in the shard the index names.
void Validate(const std::string& dir, const Layout& layout,
              const std::vector<const std::vector<TensorInfo>*>& shards) {
  const std::string where = DirWhere(dir);
  std::map<std::string, size_t> seen;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (const auto& t : *shards[s]) {
      const auto [it, inserted] = seen.emplace(t.name, s);
      if (!inserted)
        Fail(fmt::format("{}: tensor '{}'", where, t.name), "appears in two shards: {} and {}",
             fs::path(layout.files[it->second]).filename().string(),
             fs::path(layout.files[s]).filename().string());
    }
  }
  for (const auto& [name, s] : layout.weight_map) {
    const auto it = seen.find(name);
    if (it == seen.end() || it->second != s)
      Fail(fmt::format("{}: tensor '{}'", where, name), "{} names shard '{}' but it is not there{}",
           kIndex, fs::path(layout.files[s]).filename().string(),
           it == seen.end()
               ? ""
               : " (found in '" + fs::path(layout.files[it->second]).filename().string() + "')");
  }
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  if (tqmlx::IsTqMlxDir(dir)) return tqmlx::Import(dir);
  return OpenStored(dir);
}

std::unique_ptr<Checkpoint> Checkpoint::OpenStored(const std::string& dir) {
  const Layout layout = Resolve(dir);
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  std::vector<const std::vector<TensorInfo>*> lists;
  for (const auto& f : layout.files) {
    shards.push_back(SafetensorsFile::Open(f));
    lists.push_back(&shards.back()->tensors());
  }
  Validate(dir, layout, lists);
  auto c = FromParts(dir, "", std::move(shards));
  for (size_t s = 0; s < c->shards_.size(); ++s) {
    const SafetensorsFile& f = *c->shards_[s];
    for (const auto& t : f.tensors()) {
      Entry e{t, f.View(t.name).bytes(), false};
      e.info.shard = uint32_t(s);
      c->entries_.emplace(t.name, std::move(e));
    }
  }
  return c;
}

std::unique_ptr<Checkpoint> Checkpoint::FromParts(
    std::string dir, std::string source_format,
    std::vector<std::unique_ptr<SafetensorsFile>> shards) {
  auto c = std::make_unique<Checkpoint>();
  c->dir_ = std::move(dir);
  c->source_format_ = std::move(source_format);
  c->shards_ = std::move(shards);
  return c;
}

void Checkpoint::AddOwned(const std::string& name, DType dtype, Shape shape,
                          std::vector<uint8_t> bytes) {
  const uint64_t expect = uint64_t(NumElements(shape)) * DTypeSize(dtype);
  TQ_CHECK(bytes.size() == expect, DirWhere(dir_) + ": tensor '" + name + "'",
           "{} bytes for {} {} ({} expected)", bytes.size(), DTypeName(dtype), ShapeToString(shape),
           expect);
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  TensorInfo info{name, dtype, std::move(shape), 0, expect, 0};
  const bool added =
      entries_.emplace(name, Entry{std::move(info), owned_.back()->data(), true}).second;
  TQ_CHECK(added, DirWhere(dir_), "tensor '{}' added twice", name);
}

void Checkpoint::AddDeclared(const std::string& name, DType dtype, Shape shape) {
  const uint64_t n = uint64_t(NumElements(shape)) * DTypeSize(dtype);
  TensorInfo info{name, dtype, std::move(shape), 0, n, 0};
  const bool added = entries_.emplace(name, Entry{std::move(info), nullptr, true}).second;
  TQ_CHECK(added, DirWhere(dir_), "tensor '{}' added twice", name);
}

void Checkpoint::AddAlias(const std::string& name, DType dtype, Shape shape, size_t shard,
                          const uint8_t* data, uint64_t nbytes) {
  const std::string where = DirWhere(dir_) + ": tensor '" + name + "'";
  TQ_CHECK(shard < shards_.size(), where, "shard {} of {}", shard, shards_.size());
  const uint64_t expect = uint64_t(NumElements(shape)) * DTypeSize(dtype);
  TQ_CHECK(nbytes == expect, where, "{} bytes for {} {} ({} expected)", nbytes, DTypeName(dtype),
           ShapeToString(shape), expect);
  const MappedFile& m = shards_[shard]->mapping();
  const uint8_t* base = static_cast<const uint8_t*>(m.data());
  TQ_CHECK(data >= base && uint64_t(data - base) + nbytes <= m.size(), where,
           "bytes outside shard '{}'", shards_[shard]->path());
  TensorInfo info{name, dtype, std::move(shape), uint64_t(data - base), nbytes, uint32_t(shard)};
  const bool added = entries_.emplace(name, Entry{std::move(info), data, false}).second;
  TQ_CHECK(added, DirWhere(dir_), "tensor '{}' added twice", name);
}

std::vector<TensorInfo> Checkpoint::ReadHeaders(const std::string& dir,
                                                std::vector<std::string>* shard_files) {
  if (tqmlx::IsTqMlxDir(dir)) {
    // The native tensors it stands for (signs and codebooks are read: they decide the layout).
    const auto c = tqmlx::Import(dir, /*headers_only=*/true);
    std::vector<TensorInfo> out;
    for (const std::string& n : c->Names()) out.push_back(c->Info(n));
    if (shard_files) *shard_files = ShardFiles(dir);
    return out;
  }
  const Layout layout = Resolve(dir);
  std::vector<std::vector<TensorInfo>> per_shard;
  for (const auto& f : layout.files) per_shard.push_back(SafetensorsFile::ReadHeader(f));
  std::vector<const std::vector<TensorInfo>*> lists;
  for (const auto& l : per_shard) lists.push_back(&l);
  Validate(dir, layout, lists);
  std::vector<TensorInfo> out;
  for (size_t s = 0; s < per_shard.size(); ++s) {
    for (auto& t : per_shard[s]) {
      t.shard = uint32_t(s);
      out.push_back(std::move(t));
    }
  }
  if (shard_files) *shard_files = layout.files;
  return out;
}

std::vector<std::string> Checkpoint::ShardFiles(const std::string& dir) {
  return Resolve(dir).files;
}

bool Checkpoint::Has(const std::string& name) const { return entries_.count(name) != 0; }

const SafetensorsFile& Checkpoint::ShardOf(const std::string& name) const {
  const Entry& e = [&]() -> const Entry& {
    const auto it = entries_.find(name);
    if (it == entries_.end()) Fail(DirWhere(dir_), "missing tensor '{}'", name);
    return it->second;
  }();
  TQ_CHECK(!e.owned, DirWhere(dir_), "tensor '{}' is held in memory (imported), not in a shard",
           name);
  return *shards_[e.info.shard];
}

const TensorInfo& Checkpoint::Info(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) Fail(DirWhere(dir_), "missing tensor '{}'", name);
  return it->second.info;
}

TensorView Checkpoint::View(const std::string& name) const {
  const TensorInfo& i = Info(name);
  const uint8_t* data = entries_.at(name).data;
  TQ_CHECK(data != nullptr || i.nbytes == 0, DirWhere(dir_),
           "tensor '{}' was read as a header only (no data)", name);
  return TensorView{data, i.dtype, i.shape};
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [n, e] : entries_) names.push_back(n);
  return names;  // std::map keeps them sorted
}

uint64_t Checkpoint::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& [n, e] : entries_) total += e.info.nbytes;
  return total;
}

}  // namespace tq
