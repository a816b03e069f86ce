#include "hub/remote_checkpoint.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "hub/file_selection.h"
#include "io/json_fields.h"

namespace tq::hub {
namespace {

constexpr const char* kSingle = "model.safetensors";

// The header of one shard: bytes [0, 8) give N, bytes [8, 8 + N) the JSON.
std::vector<TensorInfo> ReadShardHeader(HubApi& api, const HubId& id, const std::string& commit,
                                        const RepoFile& f) {
  const std::string where = fmt::format("safetensors {}: {}", id.repo(), f.path);
  if (f.size < 8)
    Fail(where, "the file is {} bytes, shorter than the 8-byte header length", f.size);
  const std::string len_bytes = api.FetchRange(id, commit, f.path, 0, 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(len_bytes[size_t(i)]);
  if (n > kSafetensorsMaxHeaderBytes)
    Fail(where, "header length {} exceeds the {}-byte limit", n, kSafetensorsMaxHeaderBytes);
  if (n + 8 > uint64_t(f.size))
    Fail(where, "header length {} runs past the end of the {}-byte file", n, f.size);
  const std::string header = n > 0 ? api.FetchRange(id, commit, f.path, 8, int64_t(n)) : "";
  std::string prefix = len_bytes + header;
  return ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size(),
                                uint64_t(f.size), where, nullptr);
}

}  // namespace

RemoteCheckpoint ReadRemoteCheckpoint(HubApi& api, const HubId& id) {
  const int64_t bytes_before = api.http().body_bytes();
  const std::string repo_where = fmt::format("hub {}", id.repo());
  RemoteCheckpoint out;
  const RepoInfo info = api.Revision(id);
  out.commit = info.commit;
  if (!info.Find("config.json"))
    Fail(repo_where, "revision '{}' has no config.json: not a transformers model repository",
         id.revision);
  out.config = ParseModelConfig(api.FetchText(id, info.commit, "config.json", 4 << 20),
                                fmt::format("config {}: config.json", id.repo()));

  // Which shards, and which tensor the index puts where.
  std::map<std::string, std::string> weight_map;  // tensor -> shard (from the index)
  std::set<std::string> shards;
  if (info.Find(kIndexFile)) {
    const std::string iwhere = fmt::format("checkpoint index {}: {}", id.repo(), kIndexFile);
    const std::string text = api.FetchText(id, info.commit, kIndexFile, 64 << 20);
    shards = IndexShardNames(text, iwhere);
    const nlohmann::json j = ParseJson(text, iwhere);
    for (const auto& [name, file] : j["weight_map"].items()) weight_map[name] = file;
    for (const std::string& s : shards)
      if (!info.Find(s)) Fail(repo_where, "shard '{}' named by {} is missing", s, kIndexFile);
  } else if (info.Find(kSingle)) {
    shards.insert(kSingle);
  } else {
    std::vector<std::string> found;
    for (const RepoFile& f : info.files)
      if (f.path.size() > 12 && f.path.compare(f.path.size() - 12, 12, ".safetensors") == 0)
        found.push_back(f.path);
    if (!found.empty())
      Fail(repo_where, "{} .safetensors file(s) (first: {}) but no {} naming the shards, and no {}",
           found.size(), found.front(), kIndexFile, kSingle);
    Fail(repo_where,
         "revision '{}' holds no {} or {} (turboquant reads safetensors checkpoints; {} files)",
         id.revision, kSingle, kIndexFile, info.files.size());
  }
  out.shard_files.assign(shards.begin(), shards.end());  // std::set: sorted

  // Shard headers, a few at a time.
  std::vector<std::vector<TensorInfo>> per_shard(out.shard_files.size());
  std::vector<std::exception_ptr> errors(out.shard_files.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < out.shard_files.size();) {
      try {
        per_shard[i] = ReadShardHeader(api, id, info.commit, *info.Find(out.shard_files[i]));
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min<size_t>(8, out.shard_files.size()); ++t)
    pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);  // the first failing shard, in name order

  // Every tensor in one shard; every indexed tensor where the index says (Checkpoint's rules).
  const std::string cwhere = fmt::format("checkpoint {}", id.repo());
  std::map<std::string, size_t> seen;
  for (size_t s = 0; s < per_shard.size(); ++s) {
    for (TensorInfo& t : per_shard[s]) {
      const auto [it, inserted] = seen.emplace(t.name, s);
      if (!inserted)
        Fail(fmt::format("{}: tensor '{}'", cwhere, t.name), "appears in two shards: {} and {}",
             out.shard_files[it->second], out.shard_files[s]);
      t.shard = uint32_t(s);
    }
  }
  for (const auto& [name, file] : weight_map) {
    const auto it = seen.find(name);
    if (it == seen.end() || out.shard_files[it->second] != file)
      Fail(fmt::format("{}: tensor '{}'", cwhere, name), "{} names shard '{}' but it is not there",
           kIndexFile, file);
  }
  for (auto& l : per_shard)
    for (auto& t : l) out.tensors.push_back(std::move(t));

  for (const RepoFile& f : SelectFiles(info, {}, shards)) {
    out.download_bytes += std::max<int64_t>(0, f.size);
    out.download_files++;
  }
  out.bytes_read = api.http().body_bytes() - bytes_before;
  return out;
}

}  // namespace tq::hub
