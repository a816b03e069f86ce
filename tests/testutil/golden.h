// The golden reference of a shared model (golden.safetensors): the prompt's ids, Hugging Face's
// fp32 logits over it and its greedy continuation. Header-only: the test binaries that include it
// link tq_io.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "testutil/testutil.h"

namespace tq::test {

struct Golden {
  std::vector<int32_t> input_ids, greedy_ids;
  std::vector<float> logits;  // [T, vocab]
};

inline Golden LoadGolden(const std::string& model) {
  auto f = SafetensorsFile::Open(RequireFile(ModelDir(model) + "/golden.safetensors"));
  Golden g;
  auto ids = f->View("input_ids");
  g.input_ids.assign(ids.as<int32_t>(), ids.as<int32_t>() + ids.numel());
  auto greedy = f->View("greedy_ids");
  g.greedy_ids.assign(greedy.as<int32_t>(), greedy.as<int32_t>() + greedy.numel());
  auto logits = f->View("logits");
  g.logits.resize(size_t(logits.numel()));
  ToF32(logits, g.logits.data());
  return g;
}

}  // namespace tq::test
