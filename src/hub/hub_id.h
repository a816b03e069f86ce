// Hugging Face model repository ids: "org/name" or "org/name@revision" (a branch, tag or commit).
#pragma once

#include <optional>
#include <string>

namespace tq::hub {

struct HubId {
  std::string org, name;
  std::string revision = "main";  // branch, tag or 40-hex commit
  bool revision_given = false;    // "@rev" was written

  std::string repo() const { return org + "/" + name; }  // "Qwen/Qwen3-8B"
  // The cache folder of the repository: "models--Qwen--Qwen3-8B" (huggingface_hub's naming).
  std::string CacheFolder() const { return "models--" + org + "--" + name; }
  std::string ToString() const { return revision_given ? repo() + "@" + revision : repo(); }
};

// Parses "org/name[@revision]" with the hub's rules: org and name of [A-Za-z0-9._-], at most 96
// characters each, not starting or ending with '.' or '-', no "--" or ".."; a revision of
// [A-Za-z0-9._/-] without ".." (branches may hold '/'). nullopt when `text` is not an id
// (a path such as "./x", "/abs/dir", "a/b/c" is not).
std::optional<HubId> ParseHubId(const std::string& text);

// Like ParseHubId but throws tq::UsageError("[where] ...") saying what is wrong.
HubId ParseHubIdOrThrow(const std::string& text, const std::string& where);

// True for a full commit hash (40 lowercase hex digits).
bool IsCommitHash(const std::string& s);

}  // namespace tq::hub
