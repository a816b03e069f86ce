// SafetensorsFile (mmap reader) and SafetensorsWriter (streaming, atomic).
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tq {
namespace {

std::string Where(const std::string& path) { return "safetensors " + path; }

// Reads exactly `n` bytes at `offset`; false on a short read.
bool PreadAll(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return true;
}

bool PwriteAll(int fd, const void* buf, size_t n, uint64_t offset) {
  const auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
    offset += uint64_t(w);
  }
  return true;
}

}  // namespace

// ---- reader ---------------------------------------------------------------------------------

std::unique_ptr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto f = std::make_unique<SafetensorsFile>();
  f->file_ = MappedFile::Open(path);
  f->tensors_ = ParseSafetensorsHeader(f->file_.data(), f->file_.size(), f->file_.size(),
                                       Where(path), &f->metadata_);
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

std::vector<TensorInfo> SafetensorsFile::ReadHeader(const std::string& path,
                                                    std::map<std::string, std::string>* metadata) {
  const std::string where = Where(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(where, "cannot open: {}", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) Fail(where, "cannot stat: {}", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) Fail(where, "not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);
  std::vector<uint8_t> buf(8, 0);
  if (file_size < 8 || !PreadAll(fd, buf.data(), 8, 0))
    return ParseSafetensorsHeader(buf.data(), 0, file_size, where, metadata);  // throws
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | buf[i];
  // Read the header only when its length is plausible; otherwise let the parser report it.
  if (n <= kSafetensorsMaxHeaderBytes && n <= file_size - 8) {
    buf.resize(8 + n);
    if (!PreadAll(fd, buf.data() + 8, n, 8))
      Fail(where, "cannot read the {}-byte header: {}", n, std::strerror(errno));
  }
  return ParseSafetensorsHeader(buf.data(), buf.size(), file_size, where, metadata);
}

bool SafetensorsFile::Has(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo& SafetensorsFile::Info(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) Fail(fmt::format("{}: tensor '{}'", Where(path()), name), "not found");
  return tensors_[it->second];
}

TensorView SafetensorsFile::View(const std::string& name) const {
  const TensorInfo& t = Info(name);
  // An empty tensor may sit at the very end of the file: never form a pointer past it.
  const void* p = t.nbytes ? file_.data() + t.offset : file_.data();
  return TensorView{p, t.dtype, t.shape};
}

// ---- writer ---------------------------------------------------------------------------------

struct SafetensorsWriter::Impl {
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t nbytes = 0;
    uint64_t begin = 0;  // relative to the data section
  };
  std::string path, tmp;
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;  // declaration order
  std::map<std::string, size_t> index;
  int fd = -1;
  bool started = false, finished = false;
  uint64_t data_start = 0;
  size_t current = 0;    // entry being written
  uint64_t written = 0;  // bytes of entries[current] written so far

  std::string where() const { return Where(path); }
  std::string where(const Entry& e) const {
    return fmt::format("{}: tensor '{}'", where(), e.name);
  }

  void Discard() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!tmp.empty()) ::unlink(tmp.c_str());
  }

  // Assigns offsets (by element size, largest first, so each tensor is aligned) and writes
  // the header.
  void Start() {
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return DTypeSize(entries[a].dtype) > DTypeSize(entries[b].dtype);
    });
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t pos = 0;
    for (size_t i : order) {
      Entry& e = entries[i];
      e.begin = pos;
      pos += e.nbytes;
      header[e.name] = {{"dtype", std::string(DTypeName(e.dtype))},
                        {"shape", e.shape},
                        {"data_offsets", {e.begin, pos}}};
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
    data_start = 8 + text.size();

    tmp = path + ".tmp." + std::to_string(::getpid());
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) Fail(where(), "cannot create temp file {}: {}", tmp, std::strerror(errno));
    if (!PwriteAll(fd, len, 8, 0) || !PwriteAll(fd, text.data(), text.size(), 8))
      Fail(where(), "cannot write header: {}", std::strerror(errno));
    started = true;
    SkipEmpty();
  }

  void SkipEmpty() {
    while (current < entries.size() && written == entries[current].nbytes) {
      ++current;
      written = 0;
    }
  }
};

SafetensorsWriter::SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = std::move(path);
  impl_->metadata = std::move(metadata);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (impl_ && !impl_->finished) impl_->Discard();
}

void SafetensorsWriter::Declare(const std::string& name, DType dtype, const Shape& shape) {
  Impl& m = *impl_;
  const std::string w = fmt::format("{}: tensor '{}'", m.where(), name);
  if (m.started || m.finished) Fail(w, "declared after writing started");
  if (name == "__metadata__") Fail(w, "reserved name");
  if (m.index.count(name)) Fail(w, "declared twice");
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) Fail(w, "negative dimension in shape {}", ShapeToString(shape));
    if (__builtin_mul_overflow(n, uint64_t(d), &n))
      Fail(w, "shape {} overflows 64 bits", ShapeToString(shape));
  }
  m.index[name] = m.entries.size();
  m.entries.push_back({name, dtype, shape, n, 0});
}

void SafetensorsWriter::Write(const void* data, size_t nbytes) {
  Impl& m = *impl_;
  if (m.finished) Fail(m.where(), "write after Finish()");
  if (!m.started) m.Start();
  if (nbytes == 0) return;
  if (m.current >= m.entries.size())
    Fail(m.where(), "{} bytes written after the last declared tensor", nbytes);
  const Impl::Entry& e = m.entries[m.current];
  if (nbytes > e.nbytes - m.written)
    Fail(m.where(e), "chunk of {} bytes exceeds the {} bytes left of its {} bytes", nbytes,
         e.nbytes - m.written, e.nbytes);
  if (!PwriteAll(m.fd, data, nbytes, m.data_start + e.begin + m.written))
    Fail(m.where(e), "write failed: {}", std::strerror(errno));
  m.written += nbytes;
  m.SkipEmpty();
}

void SafetensorsWriter::WriteTensor(const std::string& name, const void* data, size_t nbytes) {
  Impl& m = *impl_;
  if (!m.started && !m.finished) m.Start();
  const auto it = m.index.find(name);
  if (it == m.index.end())
    Fail(fmt::format("{}: tensor '{}'", m.where(), name), "was never declared");
  const Impl::Entry& e = m.entries[it->second];
  if (e.nbytes == 0 && nbytes == 0) return;
  if (m.current >= m.entries.size() || m.current != it->second || m.written != 0)
    Fail(m.where(e), "written out of declaration order (expected '{}')",
         m.current < m.entries.size() ? m.entries[m.current].name : "<none>");
  if (nbytes != e.nbytes)
    Fail(m.where(e), "got {} bytes, its shape {} x {} needs {}", nbytes, ShapeToString(e.shape),
         DTypeName(e.dtype), e.nbytes);
  Write(data, nbytes);
}

void SafetensorsWriter::Finish() {
  Impl& m = *impl_;
  if (m.finished) Fail(m.where(), "Finish() called twice");
  if (!m.started) m.Start();
  if (m.current < m.entries.size()) {
    const Impl::Entry& e = m.entries[m.current];
    Fail(m.where(e), "only {} of its {} bytes were written", m.written, e.nbytes);
  }
  // The data section's end: make the file exactly as long as the layout says.
  const uint64_t total = m.data_start + (m.entries.empty() ? 0 : [&] {
                           uint64_t end = 0;
                           for (const auto& e : m.entries) end = std::max(end, e.begin + e.nbytes);
                           return end;
                         }());
  if (::ftruncate(m.fd, off_t(total)) != 0 || ::fsync(m.fd) != 0)
    Fail(m.where(), "cannot flush temp file {}: {}", m.tmp, std::strerror(errno));
  const int fd = m.fd;
  m.fd = -1;
  if (::close(fd) != 0) Fail(m.where(), "cannot close temp file {}", m.tmp);
  if (::rename(m.tmp.c_str(), m.path.c_str()) != 0)
    Fail(m.where(), "cannot rename {} into place: {}", m.tmp, std::strerror(errno));
  m.finished = true;
}

}  // namespace tq
