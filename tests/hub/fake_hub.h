// A local HTTP server on 127.0.0.1 that answers like the Hugging Face hub, for the hub tests:
//   GET /api/models/{org}/{name}/revision/{rev}      the revision listing (sha, siblings + sizes,
//                                                    blobId, lfs.sha256)
//   GET /{org}/{name}/resolve/{rev}/{file}           regular files: 200 + ETag (git blob sha1);
//                                                    *.safetensors (LFS): 302 to /cdn/<sha256>
//                                                    with X-Linked-Etag / X-Linked-Size
//   GET /cdn/<sha256>                                the bytes, with Range (206 / 416)
// X-Repo-Commit on every answer about a repository; 401 for a gated repository without the
// token; 404 for an unknown repository, revision or file. Knobs turn on hostile answers.
// One thread per connection, Connection: close (HTTP/1.1, no keep-alive).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tq::test {

struct FakeFile {
  std::string path, data, sha256, blob_id;
  std::string disk_path;  // when set, the bytes are read from here (data stays empty)
  int64_t size = 0;
  bool lfs = false;
};

struct FakeRepo {
  std::string commit;
  std::vector<FakeFile> files;
  bool gated = false;  // needs "Authorization: Bearer <FakeHub::kToken>"
};

class FakeHub {
 public:
  static constexpr const char* kToken = "hf_test_token";
  FakeHub();
  ~FakeHub();
  // Serves every regular file of `dir` (top level) as repository `id` at a made-up commit.
  void AddRepoFromDir(const std::string& id, const std::string& dir, bool gated = false);
  // For measurements on big checkpoints: files served from disk, not hashed (the listing gives
  // sizes only, so downloads of it cannot verify: plan only).
  void AddRepoFromDirUnhashed(const std::string& id, const std::string& dir);
  void AddRepo(const std::string& id, FakeRepo repo);
  const FakeRepo& repo(const std::string& id) const { return repos_.at(id); }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Hostile knobs (reset by Reset()).
  std::atomic<int64_t> cut_after{-1};      // next LFS file body: close after this many bytes (once)
  std::atomic<bool> corrupt{false};        // flip one byte in the middle of every file body
  std::atomic<bool> redirect_loop{false};  // resolve/ redirects to itself forever
  std::atomic<int64_t> truncate_api{-1};   // revision listing: only its first N bytes
  std::atomic<int64_t> size_skew{0};       // listing sizes off by this much
  std::atomic<bool> ignore_range{false};   // answer 200 + the whole file to Range requests
  std::atomic<bool> short_body{false};     // Content-Length one more than the bytes sent
  std::atomic<bool> bad_etag{false};       // ETag / X-Linked-Etag of another file
  void Reset();

  // What was served.
  std::atomic<int64_t> body_bytes{0};   // body bytes written, all answers
  std::vector<std::string> Requests();  // "GET /path Range: bytes=..." in arrival order

 private:
  void Accept();
  void Handle(int fd);
  std::string Answer(int fd, const std::string& method, const std::string& target,
                     const std::map<std::string, std::string>& headers);
  void SendFile(int fd, const FakeRepo* repo, const FakeFile& f,
                const std::map<std::string, std::string>& headers, bool head);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::vector<std::string> requests_;
  std::map<std::string, FakeRepo> repos_;
};

}  // namespace tq::test
