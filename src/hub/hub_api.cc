#include "hub/hub_api.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/json_fields.h"

namespace tq::hub {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string TrimToken(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool IsHex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// A repository-relative path that is safe to place under snapshots/<commit>/.
bool SafeRepoPath(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/' || p.size() > 1024) return false;
  if (p.find('\\') != std::string::npos || p.find('\0') != std::string::npos) return false;
  size_t b = 0;
  while (b <= p.size()) {
    size_t e = p.find('/', b);
    if (e == std::string::npos) e = p.size();
    const std::string part = p.substr(b, e - b);
    if (part.empty() || part == "." || part == "..") return false;
    b = e + 1;
  }
  return true;
}

}  // namespace

HubAccess FindHubAccess(const std::string& token_flag) {
  HubAccess a;
  a.endpoint = Env("HF_ENDPOINT");
  if (a.endpoint.empty()) a.endpoint = "https://huggingface.co";
  while (!a.endpoint.empty() && a.endpoint.back() == '/') a.endpoint.pop_back();
  if (!token_flag.empty()) {
    a.token = token_flag;
    a.token_source = "--token";
  } else if (const std::string t = Env("HF_TOKEN"); !t.empty()) {
    a.token = t;
    a.token_source = "HF_TOKEN";
  } else if (const std::string t = Env("HUGGING_FACE_HUB_TOKEN"); !t.empty()) {
    a.token = t;
    a.token_source = "HUGGING_FACE_HUB_TOKEN";
  } else {
    std::string path = Env("HF_TOKEN_PATH");
    if (path.empty()) {
      const std::string home = Env("HF_HOME");
      path = home.empty() ? Env("HOME") + "/.cache/huggingface/token" : home + "/token";
    }
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      a.token = TrimToken(ReadFileToString(path));
      if (!a.token.empty()) a.token_source = path;
    }
  }
  return a;
}

const RepoFile* RepoInfo::Find(const std::string& path) const {
  for (const RepoFile& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

RepoInfo ParseRepoInfo(const std::string& json_text, const std::string& where) {
  const nlohmann::json j = ParseJson(json_text, where);
  if (!j.is_object()) Fail(where, "expected a JSON object, got {}", j.type_name());
  const JsonFields f(j, where);
  RepoInfo info;
  const auto sha = f.String("sha");
  if (!sha) f.FailField("sha", "required but missing");
  if (!IsHex(*sha, 40)) f.FailField("sha", fmt::format("'{}' is not a 40-hex commit", *sha));
  info.commit = *sha;
  const nlohmann::json* sib = f.Get("siblings");
  if (!sib) f.FailField("siblings", "required but missing");
  if (!sib->is_array()) f.FailField("siblings", "expected a list of files");
  std::set<std::string> seen;
  for (size_t i = 0; i < sib->size(); ++i) {
    const nlohmann::json& s = (*sib)[i];
    const std::string fw = fmt::format("{}: siblings[{}]", where, i);
    if (!s.is_object()) Fail(fw, "expected an object, got {}", s.type_name());
    const JsonFields sf(s, fw);
    RepoFile rf;
    const auto name = sf.String("rfilename");
    if (!name) sf.FailField("rfilename", "required but missing");
    if (!SafeRepoPath(*name))
      sf.FailField("rfilename", fmt::format("'{}' is not a safe relative path", *name));
    rf.path = *name;
    if (!seen.insert(rf.path).second) Fail(fw, "file '{}' is listed twice", rf.path);
    if (const auto size = sf.Int("size")) {
      if (*size < 0) sf.FailField("size", fmt::format("negative ({})", *size));
      rf.size = *size;
    }
    if (const auto blob = sf.String("blobId")) {
      if (!IsHex(*blob, 40)) sf.FailField("blobId", fmt::format("'{}' is not a 40-hex id", *blob));
      rf.blob_id = *blob;
    }
    if (const nlohmann::json* lfs = sf.Get("lfs")) {
      if (!lfs->is_object()) sf.FailField("lfs", "expected an object");
      const JsonFields lf(*lfs, fw, "lfs.");
      const auto h = lf.String("sha256");
      if (!h || !IsHex(*h, 64)) lf.FailField("sha256", "expected 64 hex digits");
      rf.sha256 = *h;
      if (const auto ls = lf.Int("size")) {
        if (*ls < 0 || (rf.size >= 0 && *ls != rf.size))
          lf.FailField("size", fmt::format("{} disagrees with the file's size {}", *ls, rf.size));
        rf.size = *ls;
      }
    }
    info.files.push_back(std::move(rf));
  }
  return info;
}

HubApi::HubApi(HubAccess access, HttpSettings http)
    : access_(std::move(access)), http_([&] {
        http.token = access_.token;
        return http;
      }()) {}

void HubApi::FailStatus(const HubId& id, const std::string& what, long status,
                        const std::string& url) const {
  const std::string where = fmt::format("hub {}", id.repo());
  if (status == 401 || status == 403) {
    if (access_.token.empty())
      Fail(where,
           "{} answered {} for {}: the repository is gated or private. Accept its terms at "
           "{}/{} while logged in, then pass a token with read access: --token hf_... or "
           "HF_TOKEN=hf_...",
           access_.endpoint, status, what, access_.endpoint, id.repo());
    Fail(where,
         "{} answered {} for {}: the token (from {}) has no access to this repository (gated: "
         "accept its terms at {}/{}; or the token lacks read permission)",
         access_.endpoint, status, what, access_.token_source, access_.endpoint, id.repo());
  }
  if (status == 404)
    Fail(where, "{} has no {} (404 at {}): check the spelling of the id and the revision",
         access_.endpoint, what, url);
  Fail(where, "{} answered HTTP {} for {} ({})", access_.endpoint, status, what, url);
}

RepoInfo HubApi::Revision(const HubId& id) {
  const std::string url = fmt::format("{}/api/models/{}/{}/revision/{}?blobs=true",
                                      access_.endpoint, UrlEncode(id.org, false),
                                      UrlEncode(id.name, false), UrlEncode(id.revision, false));
  std::string body;
  const HttpResponse r = http_.GetText(url, &body, 32 << 20);
  if (r.status < 200 || r.status >= 300)
    FailStatus(id, fmt::format("revision '{}'", id.revision), r.status, url);
  return ParseRepoInfo(body, fmt::format("hub {} revision '{}'", id.repo(), id.revision));
}

std::string HubApi::FileUrl(const HubId& id, const std::string& commit,
                            const std::string& file) const {
  return fmt::format("{}/{}/{}/resolve/{}/{}", access_.endpoint, UrlEncode(id.org, false),
                     UrlEncode(id.name, false), commit, UrlEncode(file, true));
}

std::string HubApi::FetchText(const HubId& id, const std::string& commit, const std::string& file,
                              size_t max_bytes) {
  const std::string url = FileUrl(id, commit, file);
  std::string body;
  HttpResponse r;
  try {
    r = http_.GetText(url, &body, max_bytes);
  } catch (const Error&) {
    if (body.size() + 1 > max_bytes)
      Fail(fmt::format("hub {}: {}", id.repo(), file), "larger than {} bytes", max_bytes);
    throw;
  }
  if (r.status < 200 || r.status >= 300) FailStatus(id, "file " + file, r.status, url);
  return body;
}

std::string HubApi::FetchRange(const HubId& id, const std::string& commit, const std::string& file,
                               int64_t begin, int64_t n) {
  const std::string url = FileUrl(id, commit, file);
  const std::string where =
      fmt::format("hub {}: {} bytes {}..{}", id.repo(), file, begin, begin + n);
  std::string out;
  bool too_long = false;
  HttpResponse r;
  try {
    r = http_.Get(url, {begin, begin + n - 1}, [&](const char* d, size_t k) {
      too_long = int64_t(out.size() + k) > n;  // a server ignoring Range: stop early
      if (!too_long) out.append(d, k);
      return !too_long;
    });
  } catch (const Error&) {
    if (too_long) Fail(where, "the server sent more than the {} bytes asked for", n);
    throw;
  }
  if (r.status == 416) Fail(where, "the server says the range is past the end of the file");
  if (r.status < 200 || r.status >= 300) FailStatus(id, "file " + file, r.status, url);
  if (r.status != 206) Fail(where, "the server ignored the Range request (HTTP {})", r.status);
  if (int64_t(out.size()) != n) Fail(where, "got {} bytes, expected {}", out.size(), n);
  return out;
}

}  // namespace tq::hub
