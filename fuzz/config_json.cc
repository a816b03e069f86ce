// libFuzzer target: config.json and generation_config.json parsing on arbitrary text. Accepted
// configs are also queried the way the model layer does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const tq::ModelConfig c = tq::ParseModelConfig(text, "fuzz");
    int64_t n = 0;
    for (int64_t l = -1; l <= c.num_layers && l < 4096; ++l)
      n += c.LayerIsMoe(l) + c.LayerIsSliding(l);
    if (c.head_dim <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 || n < 0)
      __builtin_trap();
  } catch (const tq::Error&) {
  }
  try {
    tq::ParseGenerationConfig(text, "fuzz");
  } catch (const tq::Error&) {
  }
  return 0;
}
