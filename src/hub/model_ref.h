// What `--model X` names: an existing directory (as always), else a hub id looked up in the local
// hub cache (hub_cache.h). Files that are not checkpoints (GGUF) get a clear message saying what
// they are and what to do.
#pragma once

#include <optional>
#include <string>

#include "hub/hub_id.h"

namespace tq::hub {

enum class ModelRefKind {
  kDirectory,    // an existing directory: `dir`
  kCachedHub,    // a hub id found in the cache: `dir` = its snapshot
  kUncachedHub,  // a hub id not (fully) in the cache: `why_not_cached` says what is missing
};

struct ModelRef {
  ModelRefKind kind = ModelRefKind::kDirectory;
  std::string dir;
  std::optional<HubId> id;
  std::string commit;      // kCachedHub
  std::string cache_root;  // hub ids: the cache looked in
  std::string why_not_cached;
};

// Throws tq::Error("[--model X] ...") for a GGUF file or directory of GGUF files, another kind of
// file, or a path that does not exist and is not a hub id. `flag` names the option in messages.
ModelRef ResolveModelRef(const std::string& arg, const std::string& flag = "--model");

// The exact command that fetches `id` ("turboquant download ORG/NAME --revision R").
std::string DownloadCommand(const HubId& id);

// "GGUF version 3, 291 tensors" when `path` is a GGUF file, else nullopt.
std::optional<std::string> DescribeGguf(const std::string& path);

}  // namespace tq::hub
