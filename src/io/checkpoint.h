// A Hugging Face model directory's weights: one model.safetensors or a sharded set with
// model.safetensors.index.json. Tensors are looked up by name across shards.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace tq {

class Checkpoint {
 public:
  // Opens every shard (mmap) after validating the index (every shard present, every tensor of
  // the index found in the shard it names, no tensor name in two shards). Errors name the
  // directory, shard and tensor. A directory with neither model.safetensors nor
  // model.safetensors.index.json is an error listing what it holds.
  static std::unique_ptr<Checkpoint> Open(const std::string& dir);
  // Headers only (for plan/doctor/inspect): no data mapped, same validation. Each TensorInfo's
  // `shard` indexes `shard_files` (full paths, sorted).
  static std::vector<TensorInfo> ReadHeaders(const std::string& dir,
                                             std::vector<std::string>* shard_files = nullptr);
  // The shard files a directory's weights live in (full paths, sorted), index validated.
  static std::vector<std::string> ShardFiles(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool Has(const std::string& name) const;
  TensorView View(const std::string& name) const;  // throws "[checkpoint DIR] missing tensor 'x'"
  const TensorInfo& Info(const std::string& name) const;
  const SafetensorsFile& ShardOf(const std::string& name) const;  // for pread-based streaming
  std::vector<std::string> Names() const;                         // sorted
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  uint64_t TotalBytes() const;  // sum of tensor bytes

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace tq
