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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const tq::hub::RepoInfo info = tq::hub::ParseRepoInfo(text, "fuzz");
    for (const auto& f : info.files)
      if (f.path.empty() || f.path[0] == '/' || f.path.find("..") == 0 || f.size < -1)
        __builtin_trap();
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
