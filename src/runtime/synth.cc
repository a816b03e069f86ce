#include "runtime/synth.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "io/safetensors.h"
#include "runtime/synth_shapes.h"
#include "runtime/synth_tokenizer.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Fills `out` with bf16 values of N(0, stddev^2), approximated by the Irwin-Hall sum of four
// 16-bit uniforms (mean 2, variance 1/3): cheap, and close enough to Gaussian for weights.
void FillNormalBf16(uint64_t& state, float stddev, uint16_t* out, size_t n) {
  const float scale = stddev * 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = SplitMix(state);
    const int32_t sum = int32_t(r & 0xFFFF) + int32_t((r >> 16) & 0xFFFF) +
                        int32_t((r >> 32) & 0xFFFF) + int32_t(r >> 48) - 2 * 65536 + 2;
    out[i] = F32ToBf16(float(sum) * scale);
  }
}

// Removes the temp directory unless committed.
struct TempDirGuard {
  fs::path path;
  bool keep = false;
  ~TempDirGuard() {
    if (!keep) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};

}  // namespace

SynthResult WriteSynthCheckpoint(const SynthOptions& opts) {
  const SynthShape& shape = FindSynthShape(opts.like);
  const int64_t layers = opts.layers == 0 ? shape.layers : opts.layers;
  if (layers < 1 || layers > shape.layers) {
    throw UsageError("synth", fmt::format("--layers must be in [1, {}] for {} (got {})",
                                          shape.layers, shape.name, opts.layers));
  }
  if (opts.out_dir.empty()) throw UsageError("synth", "--out is required");
  const fs::path out = fs::path(opts.out_dir);
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
    throw UsageError("synth", fmt::format("'{}' already exists and is not empty", out.string()));
  }
  TempDirGuard tmp{out.string() + fmt::format(".tmp-{}", getpid())};
  fs::remove_all(tmp.path, ec);
  fs::create_directories(tmp.path, ec);
  TQ_CHECK(!ec, "synth", "cannot create '{}': {}", tmp.path.string(), ec.message());

  // Small files first: config, generation config, tokenizer.
  const nlohmann::json config = SynthConfigJson(shape, layers);
  const SynthTokenizerFiles tok = MakeSynthTokenizer(shape.tokenizer, shape.vocab);
  WriteFileAtomic((tmp.path / "config.json").string(), config.dump(2) + "\n");
  WriteFileAtomic((tmp.path / "generation_config.json").string(),
                  tok.generation_config.dump(2) + "\n");
  WriteFileAtomic((tmp.path / "tokenizer.json").string(), tok.tokenizer.dump() + "\n");
  WriteFileAtomic((tmp.path / "tokenizer_config.json").string(),
                  tok.tokenizer_config.dump(2) + "\n");

  // Tensors, grouped into shards of at most shard_bytes (a tensor never spans shards).
  const std::vector<SynthTensor> tensors = SynthTensors(shape, layers);
  std::vector<std::vector<size_t>> shards(1);
  uint64_t total = 0, in_shard = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = uint64_t(NumElements(tensors[i].shape)) * 2;
    if (in_shard > 0 && in_shard + bytes > opts.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }
  const size_t n_shards = shards.size();
  auto shard_name = [&](size_t s) {
    return n_shards == 1 ? std::string("model.safetensors")
                         : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n_shards);
  };

  ProgressBar bar(fmt::format("synth {}", shape.name), int64_t(total >> 20), opts.progress);
  constexpr size_t kChunk = size_t(1) << 20;  // elements per write
  std::vector<uint16_t> buf(kChunk);
  uint64_t done = 0;
  nlohmann::json weight_map = nlohmann::json::object();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  for (size_t s = 0; s < n_shards; ++s) {
    SafetensorsWriter writer((tmp.path / shard_name(s)).string(), metadata);
    for (size_t i : shards[s]) writer.Declare(tensors[i].name, DType::BF16, tensors[i].shape);
    for (size_t i : shards[s]) {
      const SynthTensor& t = tensors[i];
      weight_map[t.name] = shard_name(s);
      uint64_t state = HashName(t.name, opts.seed);
      const uint16_t constant = t.ones ? F32ToBf16(1.0f) : F32ToBf16(0.0f);
      for (size_t left = size_t(NumElements(t.shape)); left > 0;) {
        const size_t n = std::min(left, kChunk);
        if (t.stddev > 0.0f) {
          FillNormalBf16(state, t.stddev, buf.data(), n);
        } else {
          std::fill(buf.begin(), buf.begin() + std::ptrdiff_t(n), constant);
        }
        writer.Write(buf.data(), n * 2);
        left -= n;
        done += n * 2;
        bar.Update(int64_t(done >> 20));
      }
    }
    writer.Finish();
  }
  if (n_shards > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    WriteFileAtomic((tmp.path / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }
  bar.Finish();

  if (fs::exists(out, ec)) fs::remove(out, ec);  // an empty directory
  fs::rename(tmp.path, out, ec);
  TQ_CHECK(!ec, "synth", "cannot rename '{}' to '{}': {}", tmp.path.string(), out.string(),
           ec.message());
  tmp.keep = true;
  return {total, int64_t(tensors.size()), int64_t(n_shards)};
}

}  // namespace tq
