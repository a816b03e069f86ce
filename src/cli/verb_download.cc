// turboquant download ORG/NAME[@REV] [--revision R] [--include GLOB]... [--token T] [--jobs N]
//   [--cache-dir DIR] [--retries N] [--json]
// Fetches a hub repository's files into the Hugging Face cache (hub/hub_download.h): resumable,
// verified, placed atomically. Prints the snapshot directory (use it, or the id, as --model).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/verb.h"
#include "core/error.h"
#include "hub/hub_api.h"
#include "hub/hub_cache.h"
#include "hub/hub_download.h"
#include "hub/model_ref.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app{
      "Download a model from the Hugging Face hub into the local hub cache (the layout "
      "huggingface_hub uses, so Python tools share it): by default the files turboquant reads "
      "(config, tokenizer, safetensors weights). Partial files resume; every file is checked "
      "against the hub's size and sha256 before it is placed. Environment: HF_ENDPOINT (mirror), "
      "HF_TOKEN, HF_HUB_CACHE / HF_HOME (cache location), HF_HUB_OFFLINE.",
      argv[0]};
  std::string id_text, revision, token, cache_dir;
  std::vector<std::string> include;
  hub::DownloadOptions d;
  bool json = false, quiet = false;
  app.add_option("id", id_text, "repository id ORG/NAME (or ORG/NAME@REVISION)")->required();
  app.add_option("--revision", revision, "branch, tag or commit (default: main)");
  app.add_option("--include", include,
                 "only files matching this glob (repeatable; '*' also matches '/'), e.g. "
                 "'*.json' or 'model-0000[1-2]*'")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--token", token, "token for gated or private repositories (default: $HF_TOKEN)");
  app.add_option("--cache-dir", cache_dir,
                 "hub cache root (default: $HF_HUB_CACHE, $HF_HOME/hub "
                 "or ~/.cache/huggingface/hub)");
  app.add_option("--jobs,-j", d.jobs, "files transferred at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--retries", d.retries, "attempts per file after a cut connection (resuming)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_flag("--quiet,-q", quiet, "no progress bar");
  app.add_flag("--json", json, "print one JSON object instead of the snapshot path");
  return RunApp(app, argc, argv, [&] {
    d.id = hub::ParseHubIdOrThrow(id_text, "download");
    if (!revision.empty()) {
      if (d.id.revision_given && d.id.revision != revision)
        throw UsageError("--revision", fmt::format("'{}' disagrees with the id's '@{}'", revision,
                                                   d.id.revision));
      d.id = hub::ParseHubIdOrThrow(d.id.repo() + "@" + revision, "--revision");
    }
    if (hub::HubOffline())
      Fail("download " + d.id.ToString(), "HF_HUB_OFFLINE is set: no network access");
    d.include = include;
    d.cache_root = cache_dir.empty() ? hub::FindCacheRoot().dir : cache_dir;
    d.progress = !quiet && !json;
    hub::HubApi api(hub::FindHubAccess(token));
    const auto t0 = std::chrono::steady_clock::now();
    const hub::DownloadResult r = hub::Download(api, d);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (json) {
      nlohmann::ordered_json j = {{"id", d.id.repo()},
                                  {"revision", d.id.revision},
                                  {"commit", r.commit},
                                  {"snapshot", r.snapshot_dir},
                                  {"files", r.files},
                                  {"files_cached", r.files_cached},
                                  {"bytes_total", r.bytes_total},
                                  {"bytes_fetched", r.bytes_fetched},
                                  {"bytes_resumed", r.bytes_resumed},
                                  {"seconds", secs}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::fprintf(stderr,
                   "%s@%s: %d files (%d already cached), %.1f MB, %.1f MB fetched in %.1f s "
                   "(%.1f MB/s)%s\n",
                   d.id.repo().c_str(), r.commit.c_str(), r.files, r.files_cached,
                   double(r.bytes_total) / 1e6, double(r.bytes_fetched) / 1e6, secs,
                   secs > 0 ? double(r.bytes_fetched) / 1e6 / secs : 0.0,
                   r.bytes_resumed > 0
                       ? fmt::format(", {:.1f} MB resumed", double(r.bytes_resumed) / 1e6).c_str()
                       : "");
      std::printf("%s\n", r.snapshot_dir.c_str());
    }
    return kExitOk;
  });
}

VerbRegistrar reg("download",
                  "fetch a model from the Hugging Face hub into the local hub cache (resumable, "
                  "verified)",
                  &Run);

}  // namespace
}  // namespace tq::cli
