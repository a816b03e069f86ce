#include "hub/hub_download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/progress.h"
#include "hub/content_hash.h"
#include "hub/file_selection.h"
#include "hub/hub_cache.h"

namespace tq::hub {
namespace {

namespace fs = std::filesystem;

// "W/\"abc\"" -> "abc".
std::string CleanEtag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

// An exclusive lock per blob (as huggingface_hub's .locks/), so two downloads of one repository
// never write one .incomplete file together.
class BlobLock {
 public:
  BlobLock(const std::string& root, const HubId& id, const std::string& etag) {
    const fs::path dir = fs::path(root) / ".locks" / id.CacheFolder();
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string path = (dir / (etag + ".lock")).string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) Fail("hub cache " + path, "cannot open the lock: {}", std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

class File {
 public:
  File(const std::string& path, int flags) : path_(path) {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd_ < 0) Fail("hub cache " + path, "cannot open: {}", std::strerror(errno));
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  void Write(const char* d, size_t n) {
    while (n > 0) {
      const ssize_t k = ::write(fd_, d, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) Fail("hub cache " + path_, "write failed: {}", std::strerror(errno));
      d += k;
      n -= size_t(k);
    }
  }
  void Truncate() {
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0)
      Fail("hub cache " + path_, "cannot truncate: {}", std::strerror(errno));
  }
  void Sync() {
    if (::fsync(fd_) != 0) Fail("hub cache " + path_, "fsync failed: {}", std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

struct Shared {
  HubApi* api;
  const DownloadOptions* opts;
  std::string root, commit;
  RepoCachePaths paths;
  std::mutex mu;  // guards bar and the counters below
  std::unique_ptr<ProgressBar> bar;
  int64_t done_bytes = 0;  // of the selection: placed, resumed or received
  DownloadResult* result;
};

void AddProgress(Shared& s, int64_t n) {
  std::lock_guard<std::mutex> lock(s.mu);
  s.done_bytes += n;
  if (s.bar) s.bar->Update(s.done_bytes);
}

// The state of one file's transfer across attempts.
struct FileProgress {
  int64_t have = 0;      // bytes in the .incomplete file, all hashed
  int64_t received = 0;  // body bytes received for this file
  std::unique_ptr<ContentHash> hash;
};

// Why the answer's headers do not fit the listing ("" when they do).
std::string HeaderProblem(const HttpResponse& r, const RepoFile& f, const std::string& commit) {
  const std::string got_commit = r.Header("x-repo-commit");
  if (!got_commit.empty() && got_commit != commit)
    return fmt::format("the server sent commit {} for a file of commit {}", got_commit, commit);
  std::string etag = r.Header("x-linked-etag");
  if (etag.empty()) etag = r.Header("etag");
  etag = CleanEtag(etag);
  if (!etag.empty() && etag != f.etag())
    return fmt::format("the server's ETag {} disagrees with the revision listing's {}", etag,
                       f.etag());
  const std::string linked = r.Header("x-linked-size");
  if (!linked.empty() && std::strtoll(linked.c_str(), nullptr, 10) != f.size)
    return fmt::format("the server says {} bytes (X-Linked-Size), the listing {}", linked, f.size);
  return "";
}

// One attempt at the rest of `f` into `part`: a Range request from `p.have` when there is a
// part already. Returns true when the file is complete; a cut connection throws.
bool FetchOnce(Shared& s, const RepoFile& f, const std::string& part, FileProgress& p) {
  const HashKind kind = f.sha256.empty() ? HashKind::kGitBlobSha1 : HashKind::kSha256;
  File out(part, O_WRONLY | O_CREAT | O_APPEND);
  const std::string url = s.api->FileUrl(s.opts->id, s.commit, f.path);
  const ByteRange range = p.have > 0 ? ByteRange{p.have, -1} : ByteRange{};
  std::string too_long;
  auto on_start = [&](const HttpResponse& r) -> std::string {
    if (std::string why = HeaderProblem(r, f, s.commit); !why.empty()) return why;
    if (range.begin > 0 && r.status == 200) {
      // The server ignored the range and sends the whole file: start over from byte 0.
      out.Truncate();
      AddProgress(s, -p.have);
      p.have = 0;
      p.hash = std::make_unique<ContentHash>(kind, f.size);
    } else if (range.begin > 0) {
      const std::string cr = r.Header("content-range");  // "bytes 100-999/1000"
      const std::string want = fmt::format("bytes {}-", range.begin);
      if (cr.rfind(want, 0) != 0)
        return fmt::format("asked for bytes from {}, the server sent '{}'", range.begin, cr);
    }
    return "";
  };
  auto sink = [&](const char* d, size_t n) {
    if (p.have + int64_t(n) > f.size) {
      too_long = fmt::format("the server sent more than the {} bytes the listing gives", f.size);
      return false;
    }
    out.Write(d, n);
    p.hash->Update(d, n);
    p.have += int64_t(n);
    p.received += int64_t(n);
    AddProgress(s, int64_t(n));
    return true;
  };
  HttpResponse resp;
  try {
    resp = s.api->http().Get(url, range, sink, on_start);
  } catch (const Error&) {
    if (!too_long.empty())
      throw Error(fmt::format("hub {}: {}", s.opts->id.repo(), f.path), too_long);
    throw;
  }
  if (resp.status == 416 && p.have == f.size) return true;
  if (resp.status < 200 || resp.status >= 300)
    s.api->FailStatus(s.opts->id, "file " + f.path, resp.status, url);
  out.Sync();
  return p.have == f.size;
}

// Fetches one file (or finds it cached) and links it into the snapshot.
void DownloadFile(Shared& s, const RepoFile& f) {
  const std::string where = fmt::format("hub {}: {}", s.opts->id.repo(), f.path);
  if (f.etag().empty())
    Fail(where, "the revision listing gives no hash (sha256 or blobId) to verify it against");
  if (f.size < 0) Fail(where, "the revision listing gives no size");
  const std::string blob = s.paths.BlobPath(f.etag());
  std::error_code ec;
  fs::create_directories(fs::path(blob).parent_path(), ec);
  if (ec) Fail(where, "cannot create {}: {}", fs::path(blob).parent_path().string(), ec.message());
  BlobLock lock(s.root, s.opts->id, f.etag());
  if (fs::is_regular_file(blob, ec) && int64_t(fs::file_size(blob, ec)) == f.size) {
    LinkSnapshotFile(s.paths, s.commit, f.path, f.etag());
    std::lock_guard<std::mutex> g(s.mu);
    s.result->files_cached++;
    s.done_bytes += f.size;
    if (s.bar) s.bar->Update(s.done_bytes);
    return;
  }
  const std::string part = s.paths.IncompletePath(f.etag());
  const HashKind kind = f.sha256.empty() ? HashKind::kGitBlobSha1 : HashKind::kSha256;
  FileProgress p;
  p.hash = std::make_unique<ContentHash>(kind, f.size);
  p.have = fs::is_regular_file(part, ec) ? int64_t(fs::file_size(part, ec)) : 0;
  if (p.have > f.size) {
    fs::remove(part, ec);  // not a prefix of this file
    p.have = 0;
  }
  if (p.have > 0) {
    HashFilePrefix(part, p.have, *p.hash);
    std::lock_guard<std::mutex> g(s.mu);
    s.result->bytes_resumed += p.have;
  }
  AddProgress(s, p.have);
  bool complete = p.have == f.size;
  for (int attempt = 0; !complete; ++attempt) {
    std::string transport_error;
    try {
      complete = FetchOnce(s, f, part, p);
    } catch (const HttpTransportError& e) {
      // A cut connection keeps what arrived (.incomplete) for the next attempt or run; an
      // answer that contradicts the listing (a plain Error) is final.
      transport_error = e.what();
    }
    if (!complete && attempt >= s.opts->retries)
      Fail(where, "incomplete after {} attempt(s): {} of {} bytes in {} ({}); run again to resume",
           attempt + 1, p.have, f.size, part,
           transport_error.empty() ? "the answer ended early" : transport_error);
  }
  {
    std::lock_guard<std::mutex> g(s.mu);
    s.result->bytes_fetched += p.received;
  }
  const int64_t have = p.have;
  const std::string got = p.hash->HexDigest();
  if (got != f.etag()) {
    fs::remove(part, ec);
    Fail(where,
         "{} mismatch: expected {}, got {} ({} bytes): the download is corrupt and was "
         "removed; nothing was placed",
         kind == HashKind::kSha256 ? "sha256" : "git blob sha1", f.etag(), got, have);
  }
  fs::rename(part, blob, ec);
  if (ec) Fail(where, "cannot move the download into place: {}", ec.message());
  LinkSnapshotFile(s.paths, s.commit, f.path, f.etag());
}

}  // namespace

DownloadResult Download(HubApi& api, const DownloadOptions& opts) {
  DownloadResult result;
  Shared s;
  s.api = &api;
  s.opts = &opts;
  s.root = opts.cache_root.empty() ? FindCacheRoot().dir : opts.cache_root;
  s.result = &result;
  const RepoInfo info = api.Revision(opts.id);
  s.commit = info.commit;
  s.paths = CachePathsFor(opts.id, s.root);
  result.commit = info.commit;
  result.snapshot_dir = s.paths.SnapshotDir(info.commit);

  std::set<std::string> shards;
  const RepoFile* index = info.Find(kIndexFile);
  if (index && opts.include.empty()) {
    // The index says which shards are the model (a repository may also hold a consolidated copy).
    shards = IndexShardNames(api.FetchText(opts.id, info.commit, kIndexFile),
                             fmt::format("hub {}: {}", opts.id.repo(), kIndexFile));
    for (const std::string& sh : shards)
      if (!info.Find(sh))
        Fail(fmt::format("hub {}: {}", opts.id.repo(), kIndexFile),
             "names shard '{}', which the revision does not hold", sh);
  }
  const std::vector<RepoFile> files = SelectFiles(info, opts.include, shards);
  if (files.empty())
    Fail(fmt::format("hub {}", opts.id.repo()), "{} at revision '{}' ({} files)",
         opts.include.empty() ? "no files turboquant reads"
                              : "no file matches the --include patterns",
         opts.id.revision, info.files.size());
  result.files = int(files.size());
  for (const RepoFile& f : files) result.bytes_total += std::max<int64_t>(0, f.size);
  if (opts.progress)
    s.bar = std::make_unique<ProgressBar>(fmt::format("download {}", opts.id.repo()),
                                          std::max<int64_t>(1, result.bytes_total));

  std::atomic<size_t> next{0};
  std::mutex err_mu;
  std::string first_error;
  auto worker = [&] {
    for (size_t i; (i = next++) < files.size();) {
      {
        std::lock_guard<std::mutex> g(err_mu);
        if (!first_error.empty()) return;
      }
      try {
        DownloadFile(s, files[i]);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(err_mu);
        if (first_error.empty()) first_error = e.what();
      }
    }
  };
  const int jobs = std::clamp(opts.jobs, 1, 64);
  std::vector<std::thread> pool;
  for (int j = 1; j < std::min<int>(jobs, int(files.size())); ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (s.bar) s.bar->Finish(first_error.empty() ? "" : "failed");
  s.bar.reset();
  if (!first_error.empty()) throw std::runtime_error(first_error);
  WriteRef(s.paths, opts.id.revision, info.commit);
  return result;
}

}  // namespace tq::hub
