#include "hub/model_ref.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "hub/hub_cache.h"

namespace tq::hub {
namespace {

namespace fs = std::filesystem;

std::string GgufAdvice() {
  return "turboquant reads Hugging Face checkpoints (config.json + *.safetensors), not GGUF "
         "(llama.cpp's format). Use the original model instead: a directory with config.json and "
         "safetensors, or its hub id (turboquant download ORG/NAME, then --model ORG/NAME); "
         "`turboquant convert` then makes a TurboQuant checkpoint of it";
}

}  // namespace

std::optional<std::string> DescribeGguf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char h[24] = {0};
  f.read(reinterpret_cast<char*>(h), sizeof h);
  const std::streamsize got = f.gcount();
  if (got < 4 || h[0] != 'G' || h[1] != 'G' || h[2] != 'U' || h[3] != 'F') return std::nullopt;
  if (got < std::streamsize(sizeof h)) return std::string("GGUF, truncated header");
  auto le = [&](int at, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | h[at + i];
    return v;
  };
  const uint64_t version = le(4, 4);
  // Version 1 had 32-bit counts; 2 and 3 have 64-bit ones.
  const uint64_t tensors = version == 1 ? le(8, 4) : le(8, 8);
  return fmt::format("GGUF version {}, {} tensors", version, tensors);
}

ModelRef ResolveModelRef(const std::string& arg, const std::string& flag) {
  const std::string where = fmt::format("{} {}", flag, arg);
  if (arg.empty()) Fail(flag, "is empty: give a model directory or a hub id ORG/NAME");
  std::error_code ec;
  const fs::file_status st = fs::status(arg, ec);
  if (fs::is_directory(st)) {
    if (!fs::exists(fs::path(arg) / "config.json", ec)) {
      for (const auto& e : fs::directory_iterator(arg, ec)) {
        if (e.path().extension() == ".gguf") {
          const auto what = DescribeGguf(e.path().string());
          Fail(where, "holds no config.json but GGUF file(s) such as {}{}: {}",
               e.path().filename().string(), what ? " (" + *what + ")" : "", GgufAdvice());
        }
      }
    }
    return ModelRef{ModelRefKind::kDirectory, arg, std::nullopt, "", "", ""};
  }
  if (fs::exists(st)) {
    if (const auto what = DescribeGguf(arg))
      Fail(where, "is a GGUF file ({}): {}", *what, GgufAdvice());
    Fail(where,
         "is a file; {} takes a model directory (config.json + *.safetensors) or a hub id "
         "ORG/NAME",
         flag);
  }
  const std::optional<HubId> id = ParseHubId(arg);
  if (!id) Fail(where, "no such directory (nor a hub id ORG/NAME[@REVISION])");
  ModelRef r;
  r.id = id;
  r.cache_root = FindCacheRoot().dir;
  std::string why;
  if (const auto snap = FindCachedSnapshot(*id, r.cache_root, &why)) {
    r.kind = ModelRefKind::kCachedHub;
    r.dir = snap->dir;
    r.commit = snap->commit;
  } else {
    r.kind = ModelRefKind::kUncachedHub;
    r.why_not_cached = why;
  }
  return r;
}

std::string DownloadCommand(const HubId& id) {
  std::string cmd = "turboquant download " + id.repo();
  if (id.revision_given) cmd += " --revision " + id.revision;
  return cmd;
}

}  // namespace tq::hub
