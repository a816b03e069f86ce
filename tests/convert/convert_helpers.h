// Shared helpers of the convert tests: converting a shared model into a temp dir, running the
// golden prompt, rewriting a converted checkpoint's tensors.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/quant_recipe.h"

namespace tq::test {

ConvertOptions Options(const std::string& model, const std::string& out, int bits = 4);

// The golden prompt's token ids of a shared model.
std::vector<int32_t> GoldenIds(const std::string& model_dir);

// Logits [ids.size(), vocab] of the model at `dir` on ids (one prefill), fp32 KV cache.
std::vector<float> PrefillLogits(const std::string& dir, const std::vector<int32_t>& ids);
// Logits [vocab] of the last id, decoded alone after a prefill of the others.
std::vector<float> DecodeLogits(const std::string& dir, const std::vector<int32_t>& ids);

// max |a - b| / max |b|.
double RelativeMaxError(const std::vector<float>& a, const std::vector<float>& b);

// A tensor as read from a checkpoint, editable.
struct RawTensor {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};
using TensorMap = std::map<std::string, RawTensor>;

// All tensors of a (single-shard) checkpoint dir; writes them back to model.safetensors.
TensorMap ReadTensors(const std::string& dir);
void WriteTensors(const std::string& dir, const TensorMap& tensors);

// A source checkpoint with convert's plan of it: what SelfCalibrate / MeasureSensitivity take.
struct PlannedSource {
  std::string dir;
  std::vector<TensorInfo> infos;
  QuantRecipe recipe;
  std::unique_ptr<Checkpoint> ckpt;
  std::vector<uint8_t> Read(size_t i) const;  // the source bytes of infos[i] (= recipe.tensors[i])
};
PlannedSource OpenPlanned(const std::string& dir, const QuantRecipeOptions& ro);

}  // namespace tq::test
