// The hub's HTTP API as turboquant uses it:
//   GET {endpoint}/api/models/{org}/{name}/revision/{rev}?blobs=true
//       -> {"sha": commit, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256",
//       "size"}}]}
//   GET {endpoint}/{org}/{name}/resolve/{commit}/{file}
//       -> the file (LFS files: a redirect to the CDN; ETag / X-Linked-Etag, X-Repo-Commit)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hub/hub_http.h"
#include "hub/hub_id.h"

namespace tq::hub {

// Where and as whom: $HF_ENDPOINT (default https://huggingface.co) and the token from --token,
// else $HF_TOKEN, else (legacy) $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH or
// $HF_HOME/token (what `huggingface-cli login` writes).
struct HubAccess {
  std::string endpoint;
  std::string token;
  std::string token_source;  // "--token", "HF_TOKEN", "<path>", "" (none)
};
HubAccess FindHubAccess(const std::string& token_flag = "");

struct RepoFile {
  std::string path;     // "model-00001-of-00002.safetensors", "sub/dir/file"
  int64_t size = -1;    // bytes (-1: the hub did not say)
  std::string sha256;   // LFS files: sha256 of the content ("" otherwise)
  std::string blob_id;  // git blob sha1 (regular files' ETag)
  // The blob name in the cache and the ETag the hub sends: sha256 for LFS files, else blob_id.
  std::string etag() const { return sha256.empty() ? blob_id : sha256; }
};

struct RepoInfo {
  std::string commit;  // 40-hex
  std::vector<RepoFile> files;
  const RepoFile* Find(const std::string& path) const;
};

// Parses the revision API's JSON. `where` prefixes errors. Hostile input (not JSON, truncated,
// wrong types, a sha that is not 40 hex, paths with "..", negative sizes, duplicate files) is a
// tq::Error naming the field.
RepoInfo ParseRepoInfo(const std::string& json_text, const std::string& where);

class HubApi {
 public:
  HubApi(HubAccess access, HttpSettings http = {});
  // The revision's commit and files. 401/403 -> "gated or private" with what to do; 404 ->
  // "no such repository or revision".
  RepoInfo Revision(const HubId& id);
  std::string FileUrl(const HubId& id, const std::string& commit, const std::string& file) const;
  // A whole small file (config.json, the index) at the commit, at most `max_bytes`.
  std::string FetchText(const HubId& id, const std::string& commit, const std::string& file,
                        size_t max_bytes = 64 << 20);
  // Bytes [begin, begin + n) of a file (Range request). Exactly n bytes or an error.
  std::string FetchRange(const HubId& id, const std::string& commit, const std::string& file,
                         int64_t begin, int64_t n);
  // Throws the error for a non-2xx answer to `what` (a 401 says how to pass a token).
  [[noreturn]] void FailStatus(const HubId& id, const std::string& what, long status,
                               const std::string& url) const;

  HttpClient& http() { return http_; }
  const HubAccess& access() const { return access_; }

 private:
  HubAccess access_;
  HttpClient http_;
};

}  // namespace tq::hub
