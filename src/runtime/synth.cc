#include "runtime/synth.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/quant_recipe.h"
#include "quant/codebook.h"
#include "quant/hadamard.h"
#include "quant/packing.h"
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

// Random bytes (codes: every byte pattern is valid for the 2/3/4/8-bit formats).
void FillBytes(uint64_t& state, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = SplitMix(state);
    std::memcpy(out + i, &r, 8);
  }
  for (; i < n; ++i) out[i] = uint8_t(SplitMix(state));
}

// One tensor of the output: bf16 random / constant (`src` set) or a packed part.
struct OutTensor {
  std::string name;
  DType dtype = DType::BF16;
  Shape shape;
  const SynthTensor* src = nullptr;  // bf16 values
  enum Kind { kValues, kCodes, kScales, kCodebook, kSigns } kind = kValues;
  float scale = 0;               // kScales: the fp16 value of every group scale
  std::vector<float> levels{};   // kCodebook
  std::vector<uint8_t> bytes{};  // kSigns
  uint64_t nbytes() const { return uint64_t(NumElements(shape)) * DTypeSize(dtype); }
};

std::string ModulePrefix(const std::string& name) {
  return name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
}

// The packed tensors of `tensors` under convert's recipe at `bits`, and the config.json
// quantization block naming each linear's rotation group (what the loader reads).
std::vector<OutTensor> PackedOutputs(const std::vector<SynthTensor>& tensors,
                                     const ModelConfig& config, const SynthOptions& opts,
                                     nlohmann::ordered_json* block) {
  const int bits = opts.bits;
  const uint64_t seed = opts.seed;
  std::vector<TensorInfo> infos;
  for (const SynthTensor& t : tensors) {
    TensorInfo i;
    i.name = t.name;
    i.dtype = DType::BF16;
    i.shape = t.shape;
    i.nbytes = uint64_t(NumElements(t.shape)) * 2;
    infos.push_back(i);
  }
  QuantRecipeOptions ro;
  ro.bits = bits;
  ro.embed_bits = opts.embed_bits;
  if (opts.group_size > 0) ro.group_size = opts.group_size;
  ValidateQuantRecipeOptions(ro);
  const QuantRecipe recipe = PlanQuantization(config, infos, ro);
  std::map<std::string, const SynthTensor*> by_name;
  for (const SynthTensor& t : tensors) by_name[t.name] = &t;
  std::vector<OutTensor> outs;
  std::set<std::string> signs_done;
  nlohmann::ordered_json q, entries = nlohmann::ordered_json::object();
  for (const TensorDecision& d : recipe.tensors) {
    const SynthTensor* src = by_name.at(d.name);
    if (!d.quantize) {
      outs.push_back({d.name, DType::BF16, d.shape, src});
      continue;
    }
    TQ_CHECK(d.scale_format == quant::ScaleFormat::kF16 && d.bits >= 2, "synth",
             "'{}': synth writes fp16-scaled 2/3/4/8-bit codes only", d.name);
    const int64_t rows = d.shape[0], cols = d.shape[1], groups = cols / d.group_size;
    const std::string p = ModulePrefix(d.name);
    // convert's codebooks: Lloyd-Max for N(0, 1), the int8 grid for q8 (convert.cc SpecFor).
    const quant::Codebook& cb = *d.format == quant::CodeFormat::kQ8
                                    ? quant::LinearQ8Codebook()
                                    : quant::GaussianCodebook(*d.format);
    // Uniform random codes: E[level²] over the levels; scale so each weight has src's stddev.
    double ms = 0;
    for (float v : cb.levels) ms += double(v) * v;
    ms /= double(cb.levels.size());
    OutTensor codes{p + ".codes", DType::U8, {rows, int64_t(quant::PackedBytes(*d.format, cols))}};
    codes.kind = OutTensor::kCodes;
    outs.push_back(std::move(codes));
    OutTensor sc{p + ".scales", DType::F16, {rows, groups}};
    sc.kind = OutTensor::kScales;
    sc.scale = float(double(src->stddev) / std::sqrt(ms));
    outs.push_back(std::move(sc));
    OutTensor book{p + ".codebook", DType::F32, {int64_t(cb.levels.size())}};
    book.kind = OutTensor::kCodebook;
    book.levels = cb.levels;
    outs.push_back(std::move(book));
    nlohmann::ordered_json e;
    e["format"] = std::string(quant::Traits(*d.format).name);
    e["shape"] = d.shape;
    e["group_size"] = d.group_size;
    e["scales"] = "f16";
    if (d.rotation_block > 0) {
      std::string group = d.rotation_group;
      std::replace(group.begin(), group.end(), '/', '.');
      e["rotation_group"] = group;
      e["rotation_block"] = d.rotation_block;
      if (signs_done.insert(group).second) {
        OutTensor s{group + ".signs", DType::U8, {cols / d.rotation_block, d.rotation_block / 8}};
        s.kind = OutTensor::kSigns;
        s.bytes = quant::HadamardSigns::Generate(cols, HashName(group, seed)).ToBits();
        outs.push_back(std::move(s));
      }
    } else {
      e["rotation_group"] = nullptr;
    }
    entries[p] = std::move(e);
  }
  q["mode"] = "turboquant";
  q["format_version"] = 2;
  q["method"] = "turboquant";
  q["bits"] = bits;
  q["group_size"] = ro.group_size;
  q["rotation"] = "hadamard";
  q["seed"] = seed;
  q["synthetic"] = true;  // random codes, not a conversion
  q["tensors"] = std::move(entries);
  *block = std::move(q);
  return outs;
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

  if (opts.bits != 0 && opts.bits != 2 && opts.bits != 3 && opts.bits != 4 && opts.bits != 8)
    throw UsageError("synth", fmt::format("--bits must be 2, 3, 4 or 8 (got {})", opts.bits));

  // Small files first: config, generation config, tokenizer.
  nlohmann::json config = SynthConfigJson(shape, layers);
  const SynthTokenizerFiles tok = MakeSynthTokenizer(shape.tokenizer, shape.vocab);
  WriteFileAtomic((tmp.path / "config.json").string(), config.dump(2) + "\n");
  WriteFileAtomic((tmp.path / "generation_config.json").string(),
                  tok.generation_config.dump(2) + "\n");
  WriteFileAtomic((tmp.path / "tokenizer.json").string(), tok.tokenizer.dump() + "\n");
  WriteFileAtomic((tmp.path / "tokenizer_config.json").string(),
                  tok.tokenizer_config.dump(2) + "\n");

  // Tensors, grouped into shards of at most shard_bytes (a tensor never spans shards).
  // Packed: experts one linear each, as convert writes them (gpt_oss's are fused as published).
  const std::vector<SynthTensor> tensors = SynthTensors(
      shape, layers, opts.bits > 0 ? ExpertLayout::kPerExpert : ExpertLayout::kPublished);
  std::vector<OutTensor> outs;
  if (opts.bits > 0) {
    nlohmann::ordered_json block;
    outs = PackedOutputs(tensors, LoadModelConfig(tmp.path.string()), opts, &block);
    config["quantization"] = nlohmann::json::parse(block.dump());
    WriteFileAtomic((tmp.path / "config.json").string(), config.dump(2) + "\n");
  } else {
    for (const SynthTensor& t : tensors) outs.push_back({t.name, DType::BF16, t.shape, &t});
  }
  std::vector<std::vector<size_t>> shards(1);
  uint64_t total = 0, in_shard = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const uint64_t bytes = outs[i].nbytes();
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
  std::vector<uint8_t> bytes;
  uint64_t done = 0;
  nlohmann::json weight_map = nlohmann::json::object();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  for (size_t s = 0; s < n_shards; ++s) {
    SafetensorsWriter writer((tmp.path / shard_name(s)).string(), metadata);
    for (size_t i : shards[s]) writer.Declare(outs[i].name, outs[i].dtype, outs[i].shape);
    for (size_t i : shards[s]) {
      const OutTensor& o = outs[i];
      weight_map[o.name] = shard_name(s);
      uint64_t state = HashName(o.name, opts.seed);
      if (o.kind == OutTensor::kValues) {
        const SynthTensor& t = *o.src;
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
        continue;
      }
      if (o.kind == OutTensor::kCodebook) {
        writer.Write(o.levels.data(), o.levels.size() * sizeof(float));
      } else if (o.kind == OutTensor::kSigns) {
        writer.Write(o.bytes.data(), o.bytes.size());
      } else {
        for (uint64_t left = o.nbytes(); left > 0;) {
          const size_t n = size_t(std::min<uint64_t>(left, kChunk * 2));
          bytes.resize(n);
          if (o.kind == OutTensor::kCodes) {
            FillBytes(state, bytes.data(), n);
          } else {  // kScales: one fp16 value
            const uint16_t v = F32ToF16(o.scale);
            for (size_t j = 0; j + 1 < n; j += 2) std::memcpy(bytes.data() + j, &v, 2);
          }
          writer.Write(bytes.data(), n);
          left -= n;
          done += n;
          bar.Update(int64_t(done >> 20));
        }
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
  return {total, int64_t(outs.size()), int64_t(n_shards)};
}

}  // namespace tq
