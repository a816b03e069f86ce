// Incremental content hashes the hub names files by (OpenSSL libcrypto): sha256 of the bytes
// (LFS files), and git's blob id sha1("blob <size>\0" + bytes) (regular files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tq::hub {

enum class HashKind { kSha256, kGitBlobSha1 };

class ContentHash {
 public:
  // kGitBlobSha1 needs the total size up front (it is part of the hashed prefix).
  ContentHash(HashKind kind, int64_t total_size);
  ~ContentHash();
  void Update(const void* data, size_t n);
  std::string HexDigest();  // lower-case hex; the object is finished after this

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Hashes `n` bytes of the file at `path` from its start into `h` (resume: the part on disk).
void HashFilePrefix(const std::string& path, int64_t n, ContentHash& h);

}  // namespace tq::hub
