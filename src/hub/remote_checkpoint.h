// What `plan` needs of a hub repository, read over HTTP without downloading the weights:
// config.json, model.safetensors.index.json (when sharded) and, of each shard, only the 8-byte
// header length and the JSON header (two Range requests per shard, shards in parallel). The
// tensors come out in the order Checkpoint::ReadHeaders gives for the same files on disk (shards
// sorted by name, tensors in file order), validated the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hub/hub_api.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace tq::hub {

struct RemoteCheckpoint {
  std::string commit;
  ModelConfig config;
  std::vector<TensorInfo> tensors;       // shard = index into shard_files
  std::vector<std::string> shard_files;  // names in the repository, sorted
  int64_t bytes_read = 0;                // body bytes received for all of this (JSON + headers)
  int64_t download_bytes = 0;            // what `turboquant download` would fetch (its selection)
  int download_files = 0;
};

RemoteCheckpoint ReadRemoteCheckpoint(HubApi& api, const HubId& id);

}  // namespace tq::hub
