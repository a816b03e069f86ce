#include "hub/file_selection.h"

#include <fnmatch.h>

#include "core/error.h"
#include "io/json_fields.h"

namespace tq::hub {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool DefaultWanted(const std::string& path, const std::set<std::string>& index_shards,
                   bool has_index) {
  if (path.find('/') != std::string::npos) return false;
  if (EndsWith(path, ".safetensors")) return has_index ? index_shards.count(path) > 0 : true;
  for (const char* ext : {".json", ".jinja", ".txt", ".model", ".tiktoken"})
    if (EndsWith(path, ext)) return true;
  return false;
}

}  // namespace

std::vector<RepoFile> SelectFiles(const RepoInfo& info, const std::vector<std::string>& include,
                                  const std::set<std::string>& index_shards) {
  const bool has_index = info.Find(kIndexFile) != nullptr;
  std::vector<RepoFile> out;
  for (const RepoFile& f : info.files) {
    bool want = false;
    if (include.empty()) {
      want = DefaultWanted(f.path, index_shards, has_index);
    } else {
      for (const std::string& p : include)
        want = want || fnmatch(p.c_str(), f.path.c_str(), 0) == 0;
    }
    if (want) out.push_back(f);
  }
  return out;
}

std::set<std::string> IndexShardNames(const std::string& index_json, const std::string& where) {
  const nlohmann::json j = ParseJson(index_json, where);
  if (!j.is_object()) Fail(where, "expected a JSON object");
  const JsonFields f(j, where);
  const nlohmann::json* wm = f.Get("weight_map");
  if (!wm) f.FailField("weight_map", "required but missing");
  if (!wm->is_object() || wm->empty())
    f.FailField("weight_map", "expected a non-empty object {tensor: shard file}");
  std::set<std::string> shards;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string())
      f.FailField("weight_map",
                  fmt::format("tensor '{}' maps to {}, expected a file name", name, file.dump()));
    const std::string fn = file.get<std::string>();
    if (fn.empty() || fn == "." || fn == ".." || fn.find('/') != std::string::npos ||
        fn.find('\\') != std::string::npos)
      f.FailField("weight_map",
                  fmt::format("tensor '{}' maps to '{}', not a plain file name", name, fn));
    shards.insert(fn);
  }
  return shards;
}

}  // namespace tq::hub
