// The local Hugging Face hub cache, laid out exactly as `huggingface_hub` lays it out, so that
// Python tools and turboquant share downloads:
//
//   <root>/models--ORG--NAME/
//     refs/<revision>            a text file holding the 40-hex commit a branch or tag points to
//     blobs/<etag>               file contents, named by sha256 (LFS files) or git blob sha1
//     blobs/<etag>.incomplete    a download in progress (resumed with an HTTP Range request)
//     snapshots/<commit>/<path>  relative symlinks into ../../blobs/ (one tree per commit)
//
// <root>: $HF_HUB_CACHE, else (legacy) $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hub/hub_id.h"

namespace tq::hub {

struct CacheRoot {
  std::string dir;     // the cache root
  std::string source;  // which setting gave it ("HF_HUB_CACHE", "HF_HOME", "default", ...)
};
CacheRoot FindCacheRoot();

// True when $HF_HUB_OFFLINE is set to 1/ON/YES/TRUE (any case): no network at all.
bool HubOffline();

// A snapshot found in the cache.
struct CachedSnapshot {
  std::string repo_dir;  // <root>/models--ORG--NAME
  std::string dir;       // <repo_dir>/snapshots/<commit>
  std::string commit;
};

// Looks `id` up in the cache at `root`: a commit revision names snapshots/<commit> directly,
// a branch or tag goes through refs/<revision>. nullopt when the repository or revision is not
// cached, or when the snapshot is not usable (no config.json, a shard the index names missing
// or a dangling link into blobs/); `why_not` then says which.
std::optional<CachedSnapshot> FindCachedSnapshot(const HubId& id, const std::string& root,
                                                 std::string* why_not = nullptr);

// Paths of the cache for writers (download).
struct RepoCachePaths {
  std::string repo_dir;
  std::string BlobPath(const std::string& etag) const;
  std::string IncompletePath(const std::string& etag) const;  // <blob>.incomplete
  std::string SnapshotDir(const std::string& commit) const;
  std::string RefPath(const std::string& revision) const;
};
RepoCachePaths CachePathsFor(const HubId& id, const std::string& root);

// Makes snapshots/<commit>/<file> a relative symlink to blobs/<etag> (atomically: a temp link,
// then rename, so a reader never sees a half-made entry). Creates parent folders.
void LinkSnapshotFile(const RepoCachePaths& paths, const std::string& commit,
                      const std::string& file, const std::string& etag);

// Writes refs/<revision> = commit (atomically) unless the revision is the commit itself.
void WriteRef(const RepoCachePaths& paths, const std::string& revision, const std::string& commit);

}  // namespace tq::hub
