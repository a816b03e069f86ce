#include "cli/model_arg.h"

#include <cstdio>

#include "core/error.h"
#include "hub/hub_api.h"
#include "hub/hub_cache.h"
#include "hub/hub_download.h"
#include "hub/model_ref.h"

namespace tq::cli {

void AddModelFetchFlags(CLI::App& app, ModelFetchFlags* flags) {
  app.add_flag("--download", flags->download,
               "when --model is a hub id not in the local cache, download it first (into the "
               "Hugging Face cache, as `turboquant download` does)");
  app.add_option("--token", flags->token,
                 "Hugging Face token for gated or private repositories (default: $HF_TOKEN)");
}

std::string ResolveModelDir(const std::string& arg, const ModelFetchFlags* fetch) {
  hub::ModelRef ref = hub::ResolveModelRef(arg);
  if (ref.kind == hub::ModelRefKind::kDirectory) return ref.dir;
  const hub::HubId& id = *ref.id;
  const std::string where = "--model " + arg;
  if (ref.kind == hub::ModelRefKind::kUncachedHub) {
    if (!fetch || !fetch->download)
      Fail(where, "not in the local hub cache ({}). Download it first:\n  {}{}", ref.why_not_cached,
           hub::DownloadCommand(id), fetch ? "\nor add --download to fetch it now" : "");
    if (hub::HubOffline())
      Fail(where, "not in the local hub cache ({}), and HF_HUB_OFFLINE is set: no download",
           ref.why_not_cached);
    hub::HubApi api(hub::FindHubAccess(fetch->token));
    hub::DownloadOptions d;
    d.id = id;
    d.cache_root = ref.cache_root;
    const hub::DownloadResult r = hub::Download(api, d);
    std::fprintf(stderr, "downloaded %s: %d files, %.1f MB fetched\n", id.ToString().c_str(),
                 r.files, double(r.bytes_fetched) / 1e6);
    ref = hub::ResolveModelRef(arg);
    if (ref.kind != hub::ModelRefKind::kCachedHub)
      Fail(where, "downloaded, but the snapshot is still not usable: {}", ref.why_not_cached);
  }
  std::fprintf(stderr, "model %s: snapshot %s (%s)\n", id.ToString().c_str(), ref.commit.c_str(),
               ref.dir.c_str());
  return ref.dir;
}

}  // namespace tq::cli
