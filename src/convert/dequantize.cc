// WriteDequantizedCheckpoint (convert.h): a float32 twin of a TurboQuant checkpoint.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/convert.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "model/packed_linear.h"

namespace tq {
namespace fs = std::filesystem;

void WriteDequantizedCheckpoint(const std::string& packed_dir, const std::string& out_dir) {
  const std::string cfg_text = ReadFileToString(packed_dir + "/config.json");
  std::optional<PackedCheckpointInfo> info =
      ParseQuantizationBlock(cfg_text, packed_dir + "/config.json");
  TQ_CHECK(info.has_value(), "dequantize", "{} is not a TurboQuant checkpoint", packed_dir);
  const nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(cfg_text);
  const auto ckpt = Checkpoint::Open(packed_dir);

  // Packed tensors: everything under a quantized prefix, plus the rotation groups' signs.
  std::set<std::string> consumed;
  for (const auto& [prefix, group] : info->rotation_group) {
    for (const char* s : {".codes", ".scales", ".scale_table", ".mins", ".codebook"})
      consumed.insert(prefix + s);
    if (!group.empty()) consumed.insert(group + ".signs");
    consumed.insert(info->scale_table.at(prefix));
  }
  fs::create_directories(out_dir);
  SafetensorsWriter w(out_dir + "/model.safetensors");
  std::vector<std::string> kept;
  for (const std::string& name : ckpt->Names())
    if (!consumed.count(name)) kept.push_back(name);
  const auto& tensors = cfg["quantization"]["tensors"];
  for (const auto& [prefix, t] : tensors.items())
    w.Declare(prefix + ".weight", DType::F32, t["shape"].get<Shape>());
  for (const std::string& name : kept) {
    const TensorView v = ckpt->View(name);
    w.Declare(name, v.dtype, v.shape);
  }
  for (const auto& [prefix, t] : tensors.items()) {
    const Shape shape = t["shape"].get<Shape>();
    const auto lin = LoadPackedLinear(*ckpt, *info, prefix, shape[0], shape[1], false);
    std::vector<float> m(size_t(shape[0] * shape[1]));
    lin->DequantizeRows(0, shape[0], m.data());
    if (lin->rotation()) lin->rotation()->InverseRows(m.data(), shape[0]);  // W = W' R
    w.WriteTensor(prefix + ".weight", m.data(), m.size() * sizeof(float));
  }
  for (const std::string& name : kept) {
    const TensorView v = ckpt->View(name);
    w.WriteTensor(name, v.data, v.nbytes());
  }
  w.Finish();
  nlohmann::ordered_json out_cfg = cfg;
  out_cfg.erase("quantization");
  WriteFileAtomic(out_dir + "/config.json", out_cfg.dump(2) + "\n");
  for (const auto& e : fs::directory_iterator(packed_dir)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("tokenizer") || n.starts_with("generation_config"))
      fs::copy_file(e.path(), fs::path(out_dir) / n, fs::copy_options::overwrite_existing);
  }
}

}  // namespace tq
