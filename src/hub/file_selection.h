// Which files of a repository a download fetches (and `plan` counts).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "hub/hub_api.h"

namespace tq::hub {

constexpr const char* kIndexFile = "model.safetensors.index.json";

// Without patterns: the files turboquant reads, at the top level of the repository: *.json,
// *.jinja, *.txt, *.model, *.tiktoken, and the weights: the shards `index_shards` names when the
// repository has an index, else every *.safetensors (other formats — .bin, .gguf, .pt, .onnx,
// original/ — are left out). With patterns (`--include`, shell globs where '*' also matches
// '/', as huggingface_hub's allow_patterns): every file matching one of them.
std::vector<RepoFile> SelectFiles(const RepoInfo& info, const std::vector<std::string>& include,
                                  const std::set<std::string>& index_shards);

// The shard file names of an index (model.safetensors.index.json text); errors name `where`.
std::set<std::string> IndexShardNames(const std::string& index_json, const std::string& where);

}  // namespace tq::hub
