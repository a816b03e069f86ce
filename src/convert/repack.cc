#include "convert/repack.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/tqmlx_import.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

// Removes the temp directory unless the rename happened.
struct RemoveOnFailure {
  fs::path dir;
  bool keep = false;
  ~RemoveOnFailure() {
    std::error_code ec;
    if (!keep) fs::remove_all(dir, ec);
  }
};

// The files a checkpoint carries besides weights and config.json (as convert copies them).
bool IsCopied(const std::string& name) {
  for (const char* prefix : {"tokenizer", "special_tokens_map", "vocab", "merges", "chat_template",
                             "added_tokens", "generation_config", "preprocessor_config"}) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

RepackSummary Repack(const RepackOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  TQ_CHECK(!o.model_dir.empty() && !o.out_dir.empty(), "convert --repack",
           "--model and --out are needed");
  const fs::path out = fs::absolute(fs::path(o.out_dir)).lexically_normal();
  const fs::path src = fs::absolute(fs::path(o.model_dir)).lexically_normal();
  if (!tqmlx::IsTqMlxDir(o.model_dir))
    throw UsageError("--model " + o.model_dir,
                     "--repack reads turboquant-mlx checkpoints; this directory is not one (its "
                     "config.json has no turboquant-mlx quantization block)");
  if (fs::exists(out) && !o.force)
    throw UsageError("--out " + o.out_dir, "already exists (use --force to replace it)");
  TQ_CHECK(out != src, "convert --repack", "--out must differ from --model");

  const std::string config = tqmlx::NativeConfigJson(o.model_dir);
  const auto ckpt = Checkpoint::Open(o.model_dir);
  const std::vector<std::string> names = ckpt->Names();

  RepackSummary sum;
  std::vector<int> shard_of(names.size());
  uint64_t in_shard = 0;
  int shard = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const uint64_t b = ckpt->Info(names[i]).nbytes;
    if (in_shard > 0 && in_shard + b > o.shard_bytes) {
      ++shard;
      in_shard = 0;
    }
    in_shard += b;
    shard_of[i] = shard;
    sum.bytes += int64_t(b);
  }
  sum.num_shards = shard + 1;
  sum.tensors = int64_t(names.size());
  auto shard_name = [&](int s) {
    return sum.num_shards == 1
               ? std::string("model.safetensors")
               : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, sum.num_shards);
  };

  const fs::path tmp =
      out.parent_path() / fmt::format(".{}.tmp-convert-{}", out.filename().string(), ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  RemoveOnFailure guard{tmp};
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (int s = 0; s < sum.num_shards; ++s) {
    SafetensorsWriter w((tmp / shard_name(s)).string(), {{"format", "pt"}});
    for (size_t i = 0; i < names.size(); ++i) {
      if (shard_of[i] != s) continue;
      const TensorInfo& t = ckpt->Info(names[i]);
      w.Declare(names[i], t.dtype, t.shape);
      weight_map[names[i]] = shard_name(s);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (shard_of[i] != s) continue;
      const TensorView v = ckpt->View(names[i]);
      w.WriteTensor(names[i], v.data, v.nbytes());
    }
    w.Finish();
  }
  if (sum.num_shards > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", sum.bytes}};
    index["weight_map"] = std::move(weight_map);
    WriteFileAtomic((tmp / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }
  const nlohmann::json cfg = nlohmann::json::parse(config);
  sum.linears = int64_t(cfg["quantization"]["tensors"].size());
  WriteFileAtomic((tmp / "config.json").string(), config + "\n");
  for (const auto& entry : fs::directory_iterator(src)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && IsCopied(name)) fs::copy_file(entry.path(), tmp / name);
  }
  if (fs::exists(out)) fs::remove_all(out);  // --force
  fs::rename(tmp, out);
  guard.keep = true;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace tq
