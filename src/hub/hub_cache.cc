#include "hub/hub_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tq::hub {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// huggingface_hub expands "~" in these settings.
std::string ExpandUser(const std::string& p) {
  if (p.empty() || p[0] != '~') return p;
  if (p.size() > 1 && p[1] != '/') return p;  // "~user" is not expanded (rare; keep as is)
  return Env("HOME") + p.substr(1);
}

std::string Trim(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  return s.substr(b);
}

// Why a snapshot folder cannot be used ("" when it can): config.json readable, and the weights
// the index names (or model.safetensors) present with their links resolving.
std::string SnapshotProblem(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "config.json", ec)) {
    if (fs::is_symlink(dir / "config.json", ec))
      return "its config.json links to a blob that is missing";
    return "it has no config.json";
  }
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::is_symlink(index, ec) && !fs::exists(index, ec))
    return "its model.safetensors.index.json links to a blob that is missing";
  if (fs::exists(index, ec)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ReadFileToString(index.string()));
    } catch (const std::exception&) {
      return "";  // a broken index is reported, with details, by the checkpoint reader
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) return "";
    std::vector<std::string> missing;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) return "";
      const std::string fn = file.get<std::string>();
      if (fn.find('/') != std::string::npos || fn == ".." || fn.empty()) return "";
      if (!fs::exists(dir / fn, ec) &&
          std::find(missing.begin(), missing.end(), fn) == missing.end())
        missing.push_back(fn);
    }
    if (!missing.empty())
      return fmt::format("{} of its shards {} missing (first: {}): an interrupted download?",
                         missing.size(), missing.size() == 1 ? "is" : "are", missing.front());
    return "";
  }
  const fs::path single = dir / "model.safetensors";
  if (fs::is_symlink(single, ec) && !fs::exists(single, ec))
    return "its model.safetensors links to a blob that is missing";
  if (!fs::exists(single, ec))
    return "it holds no model.safetensors or model.safetensors.index.json (a download limited "
           "by --include?)";
  return "";
}

}  // namespace

CacheRoot FindCacheRoot() {
  if (const std::string v = Env("HF_HUB_CACHE"); !v.empty()) return {ExpandUser(v), "HF_HUB_CACHE"};
  if (const std::string v = Env("HUGGINGFACE_HUB_CACHE"); !v.empty())
    return {ExpandUser(v), "HUGGINGFACE_HUB_CACHE"};
  if (const std::string v = Env("HF_HOME"); !v.empty())
    return {(fs::path(ExpandUser(v)) / "hub").string(), "HF_HOME"};
  if (const std::string v = Env("XDG_CACHE_HOME"); !v.empty())
    return {(fs::path(ExpandUser(v)) / "huggingface" / "hub").string(), "XDG_CACHE_HOME"};
  return {(fs::path(Env("HOME")) / ".cache" / "huggingface" / "hub").string(), "default"};
}

bool HubOffline() {
  std::string v = Env("HF_HUB_OFFLINE");
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::optional<CachedSnapshot> FindCachedSnapshot(const HubId& id, const std::string& root,
                                                 std::string* why_not) {
  auto no = [&](std::string why) -> std::optional<CachedSnapshot> {
    if (why_not) *why_not = std::move(why);
    return std::nullopt;
  };
  std::error_code ec;
  const fs::path repo = fs::path(root) / id.CacheFolder();
  if (!fs::is_directory(repo, ec))
    return no(fmt::format("{} is not in the cache {}", id.repo(), root));
  std::string commit;
  const fs::path ref = repo / "refs" / id.revision;
  if (IsCommitHash(id.revision) && fs::is_directory(repo / "snapshots" / id.revision, ec)) {
    commit = id.revision;
  } else if (fs::is_regular_file(ref, ec)) {
    commit = Trim(ReadFileToString(ref.string()));
    if (!IsCommitHash(commit))
      return no(fmt::format("{} does not hold a commit hash", ref.string()));
  } else {
    return no(fmt::format("revision '{}' of {} is not in the cache (no {})", id.revision, id.repo(),
                          ref.string()));
  }
  const fs::path snap = repo / "snapshots" / commit;
  if (!fs::is_directory(snap, ec))
    return no(
        fmt::format("{} names commit {} but {} is missing", ref.string(), commit, snap.string()));
  if (const std::string p = SnapshotProblem(snap); !p.empty())
    return no(fmt::format("snapshot {} is not usable: {}", snap.string(), p));
  return CachedSnapshot{repo.string(), snap.string(), commit};
}

std::string RepoCachePaths::BlobPath(const std::string& etag) const {
  return (fs::path(repo_dir) / "blobs" / etag).string();
}
std::string RepoCachePaths::IncompletePath(const std::string& etag) const {
  return BlobPath(etag) + ".incomplete";
}
std::string RepoCachePaths::SnapshotDir(const std::string& commit) const {
  return (fs::path(repo_dir) / "snapshots" / commit).string();
}
std::string RepoCachePaths::RefPath(const std::string& revision) const {
  return (fs::path(repo_dir) / "refs" / revision).string();
}

RepoCachePaths CachePathsFor(const HubId& id, const std::string& root) {
  return RepoCachePaths{(fs::path(root) / id.CacheFolder()).string()};
}

void LinkSnapshotFile(const RepoCachePaths& paths, const std::string& commit,
                      const std::string& file, const std::string& etag) {
  const fs::path link = fs::path(paths.SnapshotDir(commit)) / file;
  const std::string where = "hub cache " + link.string();
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) Fail(where, "cannot create {}: {}", link.parent_path().string(), ec.message());
  // Relative, as huggingface_hub makes them, so the cache can be moved.
  const fs::path target = fs::path(paths.BlobPath(etag)).lexically_relative(link.parent_path());
  const fs::path tmp = link.string() + fmt::format(".tmp.{}", ::getpid());
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) Fail(where, "cannot create a symlink: {}", ec.message());
  fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp);
    Fail(where, "cannot place the symlink: {}", ec.message());
  }
}

void WriteRef(const RepoCachePaths& paths, const std::string& revision, const std::string& commit) {
  if (revision == commit) return;
  const fs::path ref = paths.RefPath(revision);
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  if (ec) Fail("hub cache " + ref.string(), "cannot create the folder: {}", ec.message());
  WriteFileAtomic(ref.string(), commit);
}

}  // namespace tq::hub
