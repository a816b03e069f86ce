// `--model X` for every verb: a directory, or a hub id ORG/NAME[@REVISION] from the local hub
// cache (hub/model_ref.h). A hub id prints one line on stderr naming the snapshot used.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tq::cli {

// --download / --token for the verbs that may fetch a model they run (generate, serve, convert).
struct ModelFetchFlags {
  bool download = false;
  std::string token;
};
void AddModelFetchFlags(CLI::App& app, ModelFetchFlags* flags);

// The directory to read for `arg`. A hub id that is not cached is an error giving the exact
// `turboquant download` command, unless `fetch` allows downloading (then it downloads, with a
// progress bar, and returns the snapshot). Throws tq::Error (exit 1) with "[--model X] ...".
std::string ResolveModelDir(const std::string& arg, const ModelFetchFlags* fetch = nullptr);

}  // namespace tq::cli
