#include "convert_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "testutil/testutil.h"

namespace tq::test {

ConvertOptions Options(const std::string& model, const std::string& out, int bits) {
  ConvertOptions o;
  o.model_dir = model;
  o.out_dir = out;
  o.recipe.bits = bits;
  o.recipe.group_size = 64;
  o.recipe.embed_bits = 8;
  o.scale = quant::ScaleMode::kRms;  // fast; the file format does not depend on it
  o.progress = false;
  return o;
}

std::vector<int32_t> GoldenIds(const std::string& model_dir) {
  const auto f = SafetensorsFile::Open(RequireFile(model_dir + "/golden.safetensors"));
  const TensorView v = f->View("input_ids");
  return {v.as<int32_t>(), v.as<int32_t>() + v.numel()};
}

std::vector<float> PrefillLogits(const std::string& dir, const std::vector<int32_t>& ids) {
  auto model = Model::Load(dir);
  auto cache = model->NewCache(KvCacheOptions{int64_t(ids.size()) + 1, KvDType::kF32});
  std::vector<float> logits(ids.size() * size_t(model->vocab_size()));
  model->Forward(ids, *cache, logits.data(), /*all_logits=*/true);
  return logits;
}

std::vector<float> DecodeLogits(const std::string& dir, const std::vector<int32_t>& ids) {
  auto model = Model::Load(dir);
  auto cache = model->NewCache(KvCacheOptions{int64_t(ids.size()) + 1, KvDType::kF32});
  std::vector<float> logits(size_t(model->vocab_size()));
  const std::span<const int32_t> all(ids);
  model->Forward(all.first(ids.size() - 1), *cache, logits.data());
  model->Forward(all.last(1), *cache, logits.data());
  return logits;
}

double RelativeMaxError(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    err = std::max(err, double(std::fabs(a[i] - b[i])));
    ref = std::max(ref, double(std::fabs(b[i])));
  }
  return a.size() == b.size() ? err / ref : 1e30;
}

TensorMap ReadTensors(const std::string& dir) {
  const auto ckpt = Checkpoint::Open(dir);
  TensorMap m;
  for (const std::string& n : ckpt->Names()) {
    const TensorView v = ckpt->View(n);
    m[n] = {v.dtype, v.shape, {v.bytes(), v.bytes() + v.nbytes()}};
  }
  return m;
}

void WriteTensors(const std::string& dir, const TensorMap& tensors) {
  const std::string path = dir + "/model.safetensors";
  std::filesystem::remove(path);
  SafetensorsWriter w(path);
  for (const auto& [n, t] : tensors) w.Declare(n, t.dtype, t.shape);
  for (const auto& [n, t] : tensors) w.WriteTensor(n, t.bytes.data(), t.bytes.size());
  w.Finish();
}

std::vector<uint8_t> PlannedSource::Read(size_t i) const {
  const TensorView v = ckpt->View(infos[i].name);
  const uint8_t* p = static_cast<const uint8_t*>(v.data);
  return {p, p + infos[i].nbytes};
}

PlannedSource OpenPlanned(const std::string& dir, const QuantRecipeOptions& ro) {
  PlannedSource s;
  s.dir = dir;
  s.infos = Checkpoint::ReadHeaders(dir);
  s.recipe = PlanQuantization(LoadModelConfig(dir), s.infos, ro);
  s.ckpt = Checkpoint::Open(dir);
  return s;
}

}  // namespace tq::test
