// Qwen3.5 / 3.6 (and Gemma 3 / 4) as published on the hub: a multimodal wrapper whose config.json
// nests the text model in text_config and whose weights live under model.language_model. (the
// vision tower beside them, the LM head at the top). A tiny file of that layout, written here
// from the tq-arch-qwen3-5-text checkpoint, loads as the text model and gives its logits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model.h"
#include "testutil/golden.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

std::vector<float> Logits(const std::string& dir, const std::vector<int32_t>& ids) {
  auto model = Model::Load(dir, {.device = "cpu"});
  auto cache = model->NewCache({.max_tokens = 64, .dtype = KvDType::kF32});
  std::vector<float> out(ids.size() * size_t(model->vocab_size()));
  model->Forward(ids, *cache, out.data(), /*all_logits=*/true);
  return out;
}

// Writes the wrapper layout of text checkpoint `src` into `dst`.
void WriteWrapper(const std::string& src, const std::string& dst, const std::string& wrapper) {
  std::ifstream in(src + "/config.json");
  nlohmann::json text = nlohmann::json::parse(in);
  text.erase("model_type");  // the wrapper names it (kWrappers: qwen3_5 -> qwen3_5_text)
  const nlohmann::json outer = {{"model_type", wrapper},
                                {"architectures", {"Qwen3_5ForConditionalGeneration"}},
                                {"text_config", text},
                                {"vision_config", {{"depth", 1}, {"hidden_size", 4}}},
                                {"tie_word_embeddings", false}};
  std::ofstream(dst + "/config.json") << outer.dump(2);

  auto file = SafetensorsFile::Open(src + "/model.safetensors");
  SafetensorsWriter w(dst + "/model.safetensors");
  std::vector<std::pair<std::string, TensorView>> out;
  for (const TensorInfo& t : file->tensors()) {
    std::string name = t.name;
    if (name.starts_with("model.")) name = "model.language_model." + name.substr(6);
    out.emplace_back(name, file->View(t.name));
  }
  const std::vector<uint16_t> vision(16, 0x3f80);  // a vision-tower tensor the text model skips
  w.Declare("model.visual.patch_embed.proj.weight", DType::BF16, {4, 4});
  for (const auto& [name, v] : out) w.Declare(name, v.dtype, v.shape);
  w.WriteTensor("model.visual.patch_embed.proj.weight", vision.data(), vision.size() * 2);
  for (const auto& [name, v] : out) w.WriteTensor(name, v.data, v.nbytes());
  w.Finish();
}

TEST(WrapperLayout, Qwen35MultimodalCheckpointLoadsTheTextModel) {
  const std::string src = test::ModelDir("arch/tq-arch-qwen3-5-text");
  test::RequireFile(src + "/model.safetensors");
  test::TempDir tmp;
  WriteWrapper(src, tmp.file(""), "qwen3_5");
  const test::Golden g = test::LoadGolden("arch/tq-arch-qwen3-5-text");
  const std::vector<float> want = Logits(src, g.input_ids);
  const std::vector<float> got = Logits(tmp.file(""), g.input_ids);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got, want) << "the wrapper's text model is the same model";
}

TEST(WrapperLayout, MissingLanguageModelTensorsAreNamed) {
  const std::string src = test::ModelDir("arch/tq-arch-qwen3-5-text");
  test::RequireFile(src + "/model.safetensors");
  test::TempDir tmp;
  WriteWrapper(src, tmp.file(""), "qwen3_5");
  // A wrapper config over the plain (un-prefixed) weights: the error names the prefixed tensor.
  std::filesystem::copy_file(src + "/model.safetensors", tmp.file("model.safetensors"),
                             std::filesystem::copy_options::overwrite_existing);
  try {
    Model::Load(tmp.file(""), {.device = "cpu"});
    FAIL() << "loaded a wrapper without model.language_model. tensors";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("model.language_model."), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tq
