// A Hugging Face model directory's weights: one model.safetensors or a sharded set with
// model.safetensors.index.json. Tensors are looked up by name across shards.
//
// A turboquant-mlx directory (io/tqmlx_import.h) opens as the native TurboQuant checkpoint it
// stands for: repacked codes, codebooks and signs live in memory beside the mapped shards, scales,
// norms and embeddings are served from the shards under their native names. Every reader (model,
// plan, doctor, inspect, convert) sees only the native tensors.
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
  // The directory's safetensors exactly as stored (no turboquant-mlx import).
  static std::unique_ptr<Checkpoint> OpenStored(const std::string& dir);
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
  // "" for a native or Hugging Face directory; "turboquant-mlx" for an imported one.
  const std::string& source_format() const { return source_format_; }

  // Building a checkpoint from parts (the turboquant-mlx import). A name may be added once.
  // AddOwned: `bytes` become the tensor's data (held here). AddAlias: `name` serves `bytes`
  // bytes at `data` inside shard `shard` (an index into shards()), e.g. one expert's slice of a
  // stacked tensor. Throws naming the tensor when the byte count does not match dtype x shape.
  static std::unique_ptr<Checkpoint> FromParts(
      std::string dir, std::string source_format,
      std::vector<std::unique_ptr<SafetensorsFile>> shards);
  void AddOwned(const std::string& name, DType dtype, Shape shape, std::vector<uint8_t> bytes);
  void AddAlias(const std::string& name, DType dtype, Shape shape, size_t shard,
                const uint8_t* data, uint64_t nbytes);
  // Hands the open shards to a new checkpoint (FromParts). Views taken before stay valid; this
  // checkpoint must not be used afterwards.
  std::vector<std::unique_ptr<SafetensorsFile>> ReleaseShards() { return std::move(shards_); }
  // A tensor known by name, dtype and shape only (ReadHeaders of an import): View() throws.
  void AddDeclared(const std::string& name, DType dtype, Shape shape);

 private:
  struct Entry {
    TensorInfo info;      // offset: in its shard (aliases) or 0 (owned)
    const uint8_t* data;  // into a mapping or an owned buffer
    bool owned;
  };
  std::string dir_, source_format_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;  // stable addresses
  std::map<std::string, Entry> entries_;
};

}  // namespace tq
