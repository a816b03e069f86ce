// safetensors files: reading (mmap, header fully validated before use) and writing (streaming,
// atomic). Format: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to the data section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace tq {

// The header's length limit (as the Hugging Face library enforces it).
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t offset = 0;  // absolute byte offset of the tensor's data in the file
  uint64_t nbytes = 0;
  uint32_t shard = 0;  // Checkpoint::ReadHeaders: index into its shard_files (else 0)
};

// One safetensors file, memory-mapped. Open() validates the whole header (length bounds, JSON,
// dtype names, shape x dtype == byte range, ranges inside the file, no overlaps, no overflow)
// and throws tq::Error "[safetensors <file>: tensor '<name>'] ..." on any problem.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> Open(const std::string& path);
  // Parses and validates only the header (reads the first 8+N bytes with pread, no mmap of the
  // data): what `plan` uses. Ranges are checked against the file's size. Tensors in file order.
  static std::vector<TensorInfo> ReadHeader(const std::string& path,
                                            std::map<std::string, std::string>* metadata = nullptr);

  const std::string& path() const { return file_.path(); }
  // Tensors in file order (by data offset). Offsets need not be aligned: the format does not
  // pad between tensors (files from SafetensorsWriter are aligned to the element size).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool Has(const std::string& name) const;
  const TensorInfo& Info(const std::string& name) const;  // throws naming the tensor
  TensorView View(const std::string& name) const;         // points into the mapping
  const MappedFile& mapping() const { return file_; }

 private:
  MappedFile file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses a header given the raw bytes of the whole file prefix (8 + N bytes) and the file size.
// `where` prefixes errors ("safetensors <path>"). Exposed for fuzzing and tests. Accepts gaps
// between tensors and trailing bytes (the HF library is stricter); rejects everything else.
std::vector<TensorInfo> ParseSafetensorsHeader(const uint8_t* data, size_t available,
                                               uint64_t file_size, const std::string& where,
                                               std::map<std::string, std::string>* metadata);

// Streaming writer: declare every tensor first (the header must come first), then write each
// tensor's bytes in declaration order, possibly in several chunks (a chunk never spans two
// tensors). Writes to "<path>.tmp.<pid>", fsyncs and renames on Finish(); a writer destroyed
// before Finish() removes its temp file. Like the HF library, the data section is laid out by
// element size (8-byte dtypes first, then 4, 2, 1; declaration order within a size) so every
// tensor is aligned to its element size; the header is padded with spaces to a multiple of 8.
// Wrong byte counts, undeclared or duplicate names -> tq::Error naming the tensor.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  void Declare(const std::string& name, DType dtype, const Shape& shape);
  // Appends bytes of the tensor currently being written (tensors in declaration order).
  void Write(const void* data, size_t nbytes);
  // Convenience: Declare-order write of one whole tensor.
  void WriteTensor(const std::string& name, const void* data, size_t nbytes);
  void Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tq
