#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace tq {

MappedFile MappedFile::Open(const std::string& path) {
  MappedFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(path, "cannot open: {}", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    Fail(path, "cannot stat: {}", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    Fail(path, "not a regular file");
  }
  f.size_ = size_t(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      Fail(path, "cannot mmap {} bytes: {}", f.size_, std::strerror(e));
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

static void Advise(const uint8_t* base, size_t size, size_t offset, size_t len, int advice) {
  if (!base || offset >= size) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;
  len = std::min(len + (offset - start), size - start);
  ::madvise(const_cast<uint8_t*>(base) + start, len, advice);
}

void MappedFile::WillNeed(size_t offset, size_t len) const {
  Advise(data_, size_, offset, len, MADV_WILLNEED);
}
void MappedFile::DontNeed(size_t offset, size_t len) const {
  Advise(data_, size_, offset, len, MADV_DONTNEED);
}

std::string ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, "cannot open: {}", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) Fail(path, "read error");
  return ss.str();
}

void WriteFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail(path, "cannot create temp file {}: {}", tmp, std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      Fail(path, "write failed: {}", std::strerror(e));
    }
    off += size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    Fail(path, "cannot flush temp file {}", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    Fail(path, "cannot rename temp file into place: {}", std::strerror(e));
  }
}

}  // namespace tq
