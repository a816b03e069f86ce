#include "hub/fake_hub.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/mapped_file.h"
#include "hub/content_hash.h"

namespace tq::test {
namespace {

namespace fs = std::filesystem;

bool SendAll(int fd, const char* d, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, d, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    d += k;
    n -= size_t(k);
  }
  return true;
}

std::string Status(int code) {
  switch (code) {
    case 200:
      return "200 OK";
    case 206:
      return "206 Partial Content";
    case 302:
      return "302 Found";
    case 401:
      return "401 Unauthorized";
    case 404:
      return "404 Not Found";
    case 416:
      return "416 Range Not Satisfiable";
    default:
      return std::to_string(code) + " Other";
  }
}

std::string Head(int code, const std::vector<std::pair<std::string, std::string>>& headers,
                 int64_t length) {
  std::string h = "HTTP/1.1 " + Status(code) + "\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  h += "Content-Length: " + std::to_string(length) + "\r\n\r\n";
  return h;
}

std::string Hash(hub::HashKind kind, const std::string& data) {
  hub::ContentHash h(kind, int64_t(data.size()));
  h.Update(data.data(), data.size());
  return h.HexDigest();
}

}  // namespace

FakeHub::FakeHub() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0)
    throw std::runtime_error("fake hub: cannot listen on 127.0.0.1");
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

FakeHub::~FakeHub() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard<std::mutex> g(mu_);
  for (auto& t : workers_) t.join();
}

void FakeHub::Reset() {
  cut_after = -1;
  corrupt = false;
  redirect_loop = false;
  truncate_api = -1;
  size_skew = 0;
  ignore_range = false;
  short_body = false;
  bad_etag = false;
  body_bytes = 0;
  std::lock_guard<std::mutex> g(mu_);
  requests_.clear();
}

std::vector<std::string> FakeHub::Requests() {
  std::lock_guard<std::mutex> g(mu_);
  return requests_;
}

void FakeHub::AddRepo(const std::string& id, FakeRepo repo) { repos_[id] = std::move(repo); }

void FakeHub::AddRepoFromDir(const std::string& id, const std::string& dir, bool gated) {
  // Reading and hashing a model takes seconds: once per directory per process.
  static std::mutex memo_mu;
  static std::map<std::string, FakeRepo> memo;
  std::lock_guard<std::mutex> lock(memo_mu);
  const std::string key = id + "\n" + dir;
  if (const auto it = memo.find(key); it != memo.end()) {
    repos_[id] = it->second;
    repos_[id].gated = gated;
    return;
  }
  FakeRepo r;
  r.gated = gated;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string all;
  for (const std::string& n : names) {
    FakeFile f;
    f.path = n;
    f.data = ReadFileToString((fs::path(dir) / n).string());
    f.size = int64_t(f.data.size());
    f.lfs = n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
    f.sha256 = Hash(hub::HashKind::kSha256, f.data);
    f.blob_id = Hash(hub::HashKind::kGitBlobSha1, f.data);
    all += f.blob_id;
    r.files.push_back(std::move(f));
  }
  r.commit = Hash(hub::HashKind::kGitBlobSha1, id + all);  // 40 hex, stable per content
  memo[key] = r;
  repos_[id] = std::move(r);
}

void FakeHub::AddRepoFromDirUnhashed(const std::string& id, const std::string& dir) {
  FakeRepo r;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    FakeFile f;
    f.path = n;
    f.disk_path = (fs::path(dir) / n).string();
    f.size = int64_t(fs::file_size(f.disk_path));
    r.files.push_back(std::move(f));
  }
  r.commit = Hash(hub::HashKind::kGitBlobSha1, id + dir);
  repos_[id] = std::move(r);
}

void FakeHub::Accept() {
  while (!stop_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stop_) return;
      continue;
    }
    std::lock_guard<std::mutex> g(mu_);
    workers_.emplace_back([this, fd] {
      Handle(fd);
      ::close(fd);
    });
  }
}

void FakeHub::Handle(int fd) {
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) return;
    req.append(buf, size_t(k));
  }
  const size_t eol = req.find("\r\n");
  const std::string line = req.substr(0, eol);
  const size_t s1 = line.find(' '), s2 = line.find(' ', s1 + 1);
  if (s1 == std::string::npos || s2 == std::string::npos) return;
  const std::string method = line.substr(0, s1), target = line.substr(s1 + 1, s2 - s1 - 1);
  std::map<std::string, std::string> headers;
  size_t pos = eol + 2;
  while (pos < req.size()) {
    const size_t e = req.find("\r\n", pos);
    if (e == std::string::npos || e == pos) break;
    const std::string h = req.substr(pos, e - pos);
    const size_t c = h.find(':');
    if (c != std::string::npos) {
      std::string k = h.substr(0, c), v = h.substr(c + 1);
      std::transform(k.begin(), k.end(), k.begin(), ::tolower);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      headers[k] = v;
    }
    pos = e + 2;
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    requests_.push_back(method + " " + target +
                        (headers.count("range") ? " Range: " + headers["range"] : ""));
  }
  const std::string reply = Answer(fd, method, target, headers);
  if (!reply.empty()) SendAll(fd, reply.data(), reply.size());
}

std::string FakeHub::Answer(int fd, const std::string& method, const std::string& target_in,
                            const std::map<std::string, std::string>& headers) {
  std::string target = target_in.substr(0, target_in.find('?'));
  auto error = [&](int code, const std::string& msg) {
    const std::string body = nlohmann::json{{"error", msg}}.dump();
    body_bytes += int64_t(body.size());
    return Head(code, {{"Content-Type", "application/json"}}, int64_t(body.size())) + body;
  };
  auto authorized = [&](const FakeRepo& r) {
    if (!r.gated) return true;
    const auto a = headers.find("authorization");
    return a != headers.end() && a->second == std::string("Bearer ") + kToken;
  };
  auto split = [](const std::string& s) {
    std::vector<std::string> parts;
    size_t b = 1;
    while (b <= s.size()) {
      size_t e = s.find('/', b);
      if (e == std::string::npos) e = s.size();
      parts.push_back(s.substr(b, e - b));
      b = e + 1;
    }
    return parts;
  };
  const std::vector<std::string> p = split(target);
  if (p.size() >= 2 && p[0] == "cdn") {
    for (const auto& [id, r] : repos_)
      for (const FakeFile& f : r.files)
        if (f.sha256 == p[1]) {
          SendFile(fd, nullptr, f, headers, method == "HEAD");
          return "";
        }
    return error(404, "no such blob");
  }
  if (p.size() == 6 && p[0] == "api" && p[1] == "models" && p[4] == "revision") {
    const auto it = repos_.find(p[2] + "/" + p[3]);
    if (it == repos_.end()) return error(404, "Repository not found");
    if (!authorized(it->second)) return error(401, "Access to model is restricted");
    if (p[5] != "main" && p[5] != it->second.commit) return error(404, "Revision not found");
    nlohmann::json sib = nlohmann::json::array();
    for (const FakeFile& f : it->second.files) {
      nlohmann::json s = {{"rfilename", f.path}, {"size", f.size + size_skew.load()}};
      if (!f.blob_id.empty()) s["blobId"] = f.blob_id;
      if (f.lfs) s["lfs"] = {{"sha256", f.sha256}, {"size", f.size + size_skew.load()}};
      sib.push_back(s);
    }
    std::string body =
        nlohmann::json{{"id", it->first}, {"sha", it->second.commit}, {"siblings", sib}}.dump();
    if (truncate_api >= 0)
      body = body.substr(0, size_t(std::min<int64_t>(truncate_api, body.size())));
    body_bytes += int64_t(body.size());
    return Head(200, {{"Content-Type", "application/json"}, {"X-Repo-Commit", it->second.commit}},
                int64_t(body.size())) +
           body;
  }
  if (p.size() >= 5 && p[2] == "resolve") {
    const auto it = repos_.find(p[0] + "/" + p[1]);
    if (it == repos_.end()) return error(404, "Repository not found");
    const FakeRepo& r = it->second;
    if (!authorized(r)) return error(401, "Access to model is restricted");
    if (p[3] != "main" && p[3] != r.commit) return error(404, "Revision not found");
    if (redirect_loop) return Head(302, {{"Location", target_in}}, 0);
    std::string file = p[4];
    for (size_t i = 5; i < p.size(); ++i) file += "/" + p[i];
    for (const FakeFile& f : r.files) {
      if (f.path != file) continue;
      const std::string etag = bad_etag ? r.files.front().sha256 : (f.lfs ? f.sha256 : f.blob_id);
      if (f.lfs)
        return Head(302,
                    {{"Location", "/cdn/" + f.sha256},
                     {"X-Repo-Commit", r.commit},
                     {"X-Linked-Etag", "\"" + etag + "\""},
                     {"X-Linked-Size", std::to_string(f.size)}},
                    0);
      SendFile(fd, &r, f, headers, method == "HEAD");
      return "";
    }
    return error(404, "Entry not found");
  }
  return error(404, "no route");
}

void FakeHub::SendFile(int fd, const FakeRepo* repo, const FakeFile& f,
                       const std::map<std::string, std::string>& headers, bool head) {
  const int64_t size = f.size;
  int64_t begin = 0, end = size - 1;
  int code = 200;
  const auto rg = headers.find("range");
  if (rg != headers.end() && !ignore_range && rg->second.rfind("bytes=", 0) == 0) {
    const std::string spec = rg->second.substr(6);
    const size_t dash = spec.find('-');
    begin = std::stoll(spec.substr(0, dash));
    if (dash + 1 < spec.size()) end = std::min<int64_t>(end, std::stoll(spec.substr(dash + 1)));
    if (begin >= size) {
      const std::string h = Head(416, {{"Content-Range", "bytes */" + std::to_string(size)}}, 0);
      SendAll(fd, h.data(), h.size());
      return;
    }
    code = 206;
  }
  std::vector<std::pair<std::string, std::string>> hs = {{"Accept-Ranges", "bytes"}};
  const std::string etag = bad_etag ? std::string(40, 'a') : (f.lfs ? f.sha256 : f.blob_id);
  if (!etag.empty()) hs.push_back({"ETag", "\"" + etag + "\""});
  if (repo) hs.push_back({"X-Repo-Commit", repo->commit});
  if (code == 206)
    hs.push_back({"Content-Range", "bytes " + std::to_string(begin) + "-" + std::to_string(end) +
                                       "/" + std::to_string(size)});
  const int64_t length = end - begin + 1;
  const std::string h = Head(code, hs, length + (short_body ? 1 : 0));
  if (!SendAll(fd, h.data(), h.size()) || head) return;
  int64_t n = length;
  const int64_t cut = f.lfs ? cut_after.exchange(-1) : -1;
  if (cut >= 0) n = std::min(n, cut);
  if (f.disk_path.empty()) {
    std::string body = f.data.substr(size_t(begin), size_t(n));
    if (corrupt && !body.empty())
      body[size_t(length / 2) < body.size() ? size_t(length / 2) : 0] ^= 0x5a;
    SendAll(fd, body.data(), body.size());
  } else {
    const int in = ::open(f.disk_path.c_str(), O_RDONLY | O_CLOEXEC);
    std::vector<char> buf(1 << 20);
    for (int64_t off = 0; in >= 0 && off < n;) {
      const ssize_t k =
          ::pread(in, buf.data(), size_t(std::min<int64_t>(n - off, buf.size())), begin + off);
      if (k <= 0 || !SendAll(fd, buf.data(), size_t(k))) break;
      off += k;
    }
    if (in >= 0) ::close(in);
  }
  body_bytes += n;
}

}  // namespace tq::test
