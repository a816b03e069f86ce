// Hugging Face weight layout of a model directory: model.safetensors, or shards named by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/json_fields.h"

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
  const Layout layout = Resolve(dir);
  auto c = std::make_unique<Checkpoint>();
  c->dir_ = dir;
  std::vector<const std::vector<TensorInfo>*> lists;
  for (const auto& f : layout.files) {
    c->shards_.push_back(SafetensorsFile::Open(f));
    lists.push_back(&c->shards_.back()->tensors());
  }
  Validate(dir, layout, lists);
  for (const auto& s : c->shards_)
    for (const auto& t : s->tensors()) c->where_[t.name] = s.get();
  return c;
}

std::vector<TensorInfo> Checkpoint::ReadHeaders(const std::string& dir,
                                                std::vector<std::string>* shard_files) {
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

bool Checkpoint::Has(const std::string& name) const { return where_.count(name) != 0; }

const SafetensorsFile& Checkpoint::ShardOf(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) Fail(DirWhere(dir_), "missing tensor '{}'", name);
  return *it->second;
}

const TensorInfo& Checkpoint::Info(const std::string& name) const {
  return ShardOf(name).Info(name);
}

TensorView Checkpoint::View(const std::string& name) const { return ShardOf(name).View(name); }

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(where_.size());
  for (const auto& [n, s] : where_) names.push_back(n);
  return names;  // std::map keeps them sorted
}

uint64_t Checkpoint::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& s : shards_)
    for (const auto& t : s->tensors()) total += t.nbytes;
  return total;
}

}  // namespace tq
