// `turboquant download`: a repository revision's files into the hub cache (hub_cache.h layout),
// so huggingface_hub finds them too. Per file: resume blobs/<etag>.incomplete with a Range
// request, check the size and the hash (sha256 for LFS files, git blob sha1 otherwise) against the
// revision listing and the server's ETag, fsync, rename to blobs/<etag>, then link
// snapshots/<commit>/<file> to it. A corrupt or short file is never placed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hub/hub_api.h"
#include "hub/hub_id.h"

namespace tq::hub {

struct DownloadOptions {
  HubId id;
  std::vector<std::string> include;  // globs; empty: the files turboquant reads (file_selection.h)
  std::string cache_root;            // empty: FindCacheRoot()
  int jobs = 4;                      // files transferred at once
  int retries = 3;                   // per file, resuming, after a cut connection
  bool progress = true;              // a progress bar on stderr
};

struct DownloadResult {
  std::string commit;
  std::string snapshot_dir;
  int files = 0;              // files in the selection
  int files_cached = 0;       // already complete in the cache
  int64_t bytes_total = 0;    // size of the selection
  int64_t bytes_fetched = 0;  // body bytes received for it (less than missing when resumed)
  int64_t bytes_resumed = 0;  // bytes found in .incomplete files and kept
};

DownloadResult Download(HubApi& api, const DownloadOptions& opts);

}  // namespace tq::hub
