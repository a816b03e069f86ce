#include "convert/sensitivity.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>

#include "convert/convert.h"
#include "convert/self_text.h"
#include "core/error.h"
#include "core/progress.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "quant/hadamard.h"
#include "quant/rng.h"

namespace tq {
namespace fs = std::filesystem;
namespace {

// Removes the scratch checkpoint on every exit path.
struct ScratchDir {
  fs::path path;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

fs::path MakeScratchDir() {
  const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  fs::path p = base / fmt::format("tq-sensitivity-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(p, ec);
  fs::create_directories(p);
  return p;
}

// Log-softmax of every row of logits [rows, vocab] in place (double accumulation).
void LogSoftmaxRows(float* x, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * vocab;
    float mx = row[0];
    for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, row[v]);
    double s = 0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(double(row[v] - mx));
    const float lse = mx + float(std::log(s));
    for (int64_t v = 0; v < vocab; ++v) row[v] -= lse;
  }
}

// Log-probabilities [sequences · tokens, vocab] of `model` on the token sequences.
std::vector<float> LogProbs(Model& model, const std::vector<std::vector<int32_t>>& seqs) {
  const int64_t vocab = model.vocab_size(), len = int64_t(seqs.at(0).size());
  KvCacheOptions kv;
  kv.max_tokens = len;
  kv.dtype = KvDType::kF32;
  auto cache = model.NewCache(kv);
  std::vector<float> out(seqs.size() * size_t(len * vocab));
  for (size_t s = 0; s < seqs.size(); ++s) {
    cache->Truncate(0);
    float* lp = out.data() + s * size_t(len * vocab);
    model.Forward(seqs[s], *cache, lp, true);
    LogSoftmaxRows(lp, len, vocab);
  }
  return out;
}

// Mean over positions of KL(p || q) from log-probabilities [positions, vocab].
double MeanKl(const std::vector<float>& lp, const std::vector<float>& lq, int64_t vocab) {
  const int64_t positions = int64_t(lp.size()) / vocab;
  double sum = 0;
  for (int64_t i = 0; i < positions; ++i) {
    const float* a = lp.data() + i * vocab;
    const float* b = lq.data() + i * vocab;
    double kl = 0;
    for (int64_t v = 0; v < vocab; ++v) kl += std::exp(double(a[v])) * double(a[v] - b[v]);
    sum += std::max(kl, 0.0);
  }
  return sum / double(positions);
}

// Adds the noise to w [rows, cols] (fp32, the tensor's own domain): rotated, t · group RMS per
// element, rotated back. Returns ‖noise‖² and adds ‖w‖² to *norm2.
double AddNoise(float* w, int64_t rows, int64_t cols, const quant::HadamardRotation* rot, int group,
                double t, quant::SplitMix64& rng, double* norm2) {
  if (rot) rot->ForwardRows(w, rows);
  const int64_t g = cols % group == 0 ? group : cols;
  double noise2 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += g) {
      float* x = w + r * cols + c0;
      double ss = 0;
      for (int64_t j = 0; j < g; ++j) ss += double(x[j]) * x[j];
      *norm2 += ss;
      const double sd = t * std::sqrt(ss / double(g));
      for (int64_t j = 0; j < g; ++j) {
        const float e = float(sd * rng.Normal());
        x[j] += e;
        noise2 += double(e) * e;
      }
    }
  }
  if (rot) rot->InverseRows(w, rows);
  return noise2;
}

}  // namespace

std::string SensitivitySetKey(const TensorDecision& d) {
  if (IsExpert(d.role))
    return fmt::format("model.layers.{}/experts/{}", d.layer, TensorRoleName(d.role));
  return d.name;
}

std::vector<TensorSensitivity> MeasureSensitivity(
    const std::string& model_dir, const QuantRecipe& recipe, const std::vector<size_t>& which,
    const SensitivityOptions& o, const std::function<std::vector<uint8_t>(size_t)>& read) {
  TQ_CHECK(o.sequences >= 1 && o.tokens >= 2 && o.noise > 0, "sensitivity",
           "bad options: {} sequences of {} tokens, noise {}", o.sequences, o.tokens, o.noise);
  const std::unique_ptr<Model> base = Model::Load(model_dir, {"cpu"});
  const int64_t vocab = base->vocab_size();
  quant::SplitMix64 token_rng(o.seed ^ 0x746f6b656e73ull);  // "tokens"
  std::vector<std::vector<int32_t>> seqs(size_t(o.sequences), std::vector<int32_t>(o.tokens));
  for (auto& s : seqs)
    for (int32_t& t : s) t = int32_t(token_rng.Next() % uint64_t(vocab));
  if (o.text == SensitivityOptions::Text::kSelf) {
    for (auto& s : seqs) SampleContinuation(*base, s, o.temperature, token_rng);
  }
  const std::vector<float> lp0 = LogProbs(*base, seqs);

  // The sets, in order of first appearance in `which`.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<size_t>> members;
  for (size_t i : which) {
    const std::string k = SensitivitySetKey(recipe.tensors.at(i));
    if (members.find(k) == members.end()) keys.push_back(k);
    members[k].push_back(i);
  }

  // The scratch checkpoint: config.json + one safetensors rewritten per set.
  ScratchDir scratch{MakeScratchDir()};
  fs::copy_file(fs::path(model_dir) / "config.json", scratch.path / "config.json");
  std::vector<std::vector<uint8_t>> source(recipe.tensors.size());
  for (size_t i = 0; i < recipe.tensors.size(); ++i) source[i] = read(i);

  std::map<size_t, TensorSensitivity> by_tensor;
  ProgressBar bar("sensitivity: noise per tensor", int64_t(keys.size()), o.progress);
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::vector<size_t>& set = members[keys[k]];
    quant::SplitMix64 rng(o.seed ^ RotationGroupSeed(0x6e6f697365ull, keys[k]));  // "noise"
    std::map<size_t, std::vector<float>> noisy;
    double norm2 = 0, noise2 = 0;
    for (size_t i : set) {
      const TensorDecision& d = recipe.tensors[i];
      TQ_CHECK(d.shape.size() == 2, "sensitivity", "'{}' is not a matrix", d.name);
      const int64_t rows = d.shape[0], cols = d.shape[1];
      std::vector<float> w(size_t(rows * cols));
      ToF32(TensorView{source[i].data(), d.dtype, d.shape}, w.data());
      std::unique_ptr<quant::HadamardRotation> rot;
      if (d.quantize && d.rotation_block > 0)
        rot = std::make_unique<quant::HadamardRotation>(
            quant::HadamardSigns::Generate(cols,
                                           RotationGroupSeed(o.rotation_seed, d.rotation_group)),
            d.rotation_block);
      noise2 += AddNoise(w.data(), rows, cols, rot.get(), o.noise_group, o.noise, rng, &norm2);
      noisy[i] = std::move(w);
    }
    {
      SafetensorsWriter wr((scratch.path / "model.safetensors").string(), {{"format", "pt"}});
      for (size_t i = 0; i < recipe.tensors.size(); ++i) {
        const TensorDecision& d = recipe.tensors[i];
        if (noisy.count(i))
          wr.Declare(d.name, DType::F32, d.shape);
        else
          wr.Declare(d.name, d.dtype, d.shape);
      }
      for (size_t i = 0; i < recipe.tensors.size(); ++i) {
        const auto it = noisy.find(i);
        if (it != noisy.end())
          wr.WriteTensor(recipe.tensors[i].name, it->second.data(), it->second.size() * 4);
        else
          wr.WriteTensor(recipe.tensors[i].name, source[i].data(), source[i].size());
      }
      wr.Finish();
    }
    double kl = 0;
    {
      const std::unique_ptr<Model> m = Model::Load(scratch.path.string(), {"cpu"});
      kl = MeanKl(lp0, LogProbs(*m, seqs), vocab);
    }
    const double t2 = norm2 > 0 ? noise2 / norm2 : 0;
    double set_weights = 0;
    for (size_t i : set) set_weights += double(NumElements(recipe.tensors[i].shape));
    for (size_t i : set) {
      // A set's α is shared by its members in proportion to their weights (linearity).
      const double share = double(NumElements(recipe.tensors[i].shape)) / set_weights;
      by_tensor[i] = {recipe.tensors[i].name, t2 > 0 ? share * kl / t2 : 0, kl, t2};
    }
    bar.Update(int64_t(k) + 1, fmt::format("{} KL {:.2e}", keys[k], kl));
  }
  bar.Finish();
  std::vector<TensorSensitivity> out;
  for (size_t i : which) out.push_back(by_tensor.at(i));
  return out;
}

}  // namespace tq
