// libFuzzer target: what a hub server answers, on arbitrary text: the revision listing
// (ParseRepoInfo), a checkpoint index's shard names, and hub ids. Accepted listings hold only
// safe relative paths (nothing can escape snapshots/<commit>/).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "hub/file_selection.h"
#include "hub/hub_api.h"
#include "hub/hub_id.h"

// Whether a listed path could leave snapshots/<commit>/: absolute, or a component that is empty,
// "." or "..". ("..model.safetensors" is a file name like any other: an earlier form of this
// check trapped on any path that merely began with "..", a false alarm found by a 300 s run.)
static bool Escapes(const std::string& p) {
  if (p.empty() || p[0] == '/') return true;
  size_t b = 0;
  while (b <= p.size()) {
    size_t e = p.find('/', b);
    if (e == std::string::npos) e = p.size();
    const std::string part = p.substr(b, e - b);
    if (part.empty() || part == "." || part == "..") return true;
    b = e + 1;
  }
  return false;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const tq::hub::RepoInfo info = tq::hub::ParseRepoInfo(text, "fuzz");
    for (const auto& f : info.files)
      if (Escapes(f.path) || f.size < -1) __builtin_trap();
    tq::hub::SelectFiles(info, {"*.json"}, {});
  } catch (const tq::Error&) {
  }
  try {
    for (const std::string& s : tq::hub::IndexShardNames(text, "fuzz"))
      if (s.find('/') != std::string::npos || s.empty()) __builtin_trap();
  } catch (const tq::Error&) {
  }
  if (const auto id = tq::hub::ParseHubId(text))
    if (id->CacheFolder().find('/') != std::string::npos) __builtin_trap();
  return 0;
}
