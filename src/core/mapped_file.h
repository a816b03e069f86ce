// A read-only memory-mapped file. Move-only; unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tq {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws tq::Error naming the path when the file cannot be opened or mapped. An empty file
  // maps to size() == 0 and data() == nullptr.
  static MappedFile Open(const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Hints the kernel to read [offset, offset+len) ahead / drop it from the page cache.
  void WillNeed(size_t offset, size_t len) const;
  void DontNeed(size_t offset, size_t len) const;

 private:
  void Reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; throws tq::Error naming the path on failure.
std::string ReadFileToString(const std::string& path);
// Writes `data` to `path` atomically: a temp file in the same directory, fsync, rename.
void WriteFileAtomic(const std::string& path, const std::string& data);

}  // namespace tq
