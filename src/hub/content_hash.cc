#include "hub/content_hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace tq::hub {

struct ContentHash::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

ContentHash::ContentHash(HashKind kind, int64_t total_size) : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  TQ_CHECK(impl_->ctx, "hash", "EVP_MD_CTX_new failed");
  const EVP_MD* md = kind == HashKind::kSha256 ? EVP_sha256() : EVP_sha1();
  TQ_CHECK(EVP_DigestInit_ex(impl_->ctx, md, nullptr) == 1, "hash", "EVP_DigestInit_ex failed");
  if (kind == HashKind::kGitBlobSha1) {
    const std::string prefix = fmt::format("blob {}", total_size);
    EVP_DigestUpdate(impl_->ctx, prefix.c_str(), prefix.size() + 1);  // with the '\0'
  }
}

ContentHash::~ContentHash() { EVP_MD_CTX_free(impl_->ctx); }

void ContentHash::Update(const void* data, size_t n) { EVP_DigestUpdate(impl_->ctx, data, n); }

std::string ContentHash::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

void HashFilePrefix(const std::string& path, int64_t n, ContentHash& h) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail("hash " + path, "cannot open: {}", std::strerror(errno));
  std::vector<char> buf(1 << 20);
  int64_t left = n;
  while (left > 0) {
    const ssize_t k = ::read(fd, buf.data(), size_t(std::min<int64_t>(left, int64_t(buf.size()))));
    if (k <= 0) {
      ::close(fd);
      Fail("hash " + path, "short read ({} bytes left)", left);
    }
    h.Update(buf.data(), size_t(k));
    left -= k;
  }
  ::close(fd);
}

}  // namespace tq::hub
