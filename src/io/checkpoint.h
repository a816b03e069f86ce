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
  // the index found in the shard it names). Errors name the directory, shard and tensor.
  static std::unique_ptr<Checkpoint> Open(const std::string& dir);
  // Headers only (for plan/doctor/inspect): no data mapped.
  static std::vector<TensorInfo> ReadHeaders(const std::string& dir,
                                             std::vector<std::string>* shard_files = nullptr);

  const std::string& dir() const { return dir_; }
  bool Has(const std::string& name) const;
  TensorView View(const std::string& name) const;  // throws "[checkpoint DIR] missing tensor 'x'"
  const TensorInfo& Info(const std::string& name) const;
  std::vector<std::string> Names() const;  // sorted
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  uint64_t TotalBytes() const;  // sum of tensor bytes

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace tq
