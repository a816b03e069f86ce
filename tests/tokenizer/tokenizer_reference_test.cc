// Both shared models' tokenizer_cases (reference.json, produced by the `tokenizers` library from
// the same tokenizer.json) must be reproduced exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"

namespace tq {
namespace {

class ReferenceCases : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceCases, EncodeAndDecodeMatchTokenizers) {
  const std::string dir = test::ModelDir(GetParam());
  auto tok = Tokenizer::Load(dir);
  const auto ref = nlohmann::json::parse(ReadFileToString(dir + "/reference.json"));
  const auto& cases = ref.at("tokenizer_cases");
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    SCOPED_TRACE("text: \"" + text + "\"");
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const auto ids_ns = c.at("ids_no_special").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->Encode(text, true), ids);
    EXPECT_EQ(tok->Encode(text, false), ids_ns);
    EXPECT_EQ(tok->Decode(ids, false), c.at("decoded").get<std::string>());
  }
}

// golden.safetensors "input_ids" ([T] I32) is the Hugging Face tokenization of the prompt.
std::vector<int32_t> GoldenInputIds(const std::string& dir) {
  const std::string raw = ReadFileToString(dir + "/golden.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  const auto header = nlohmann::json::parse(raw.substr(8, n));
  const auto& t = header.at("input_ids");
  EXPECT_EQ(t.at("dtype"), "I32");
  const size_t b = t.at("data_offsets")[0], e = t.at("data_offsets")[1];
  std::vector<int32_t> ids((e - b) / 4);
  std::memcpy(ids.data(), raw.data() + 8 + n + b, e - b);
  return ids;
}

TEST_P(ReferenceCases, PromptMatchesGoldenInputIds) {
  const std::string dir = test::ModelDir(GetParam());
  auto tok = Tokenizer::Load(dir);
  const auto ref = nlohmann::json::parse(ReadFileToString(dir + "/reference.json"));
  const std::string prompt = ref.at("prompt");
  EXPECT_EQ(tok->Encode(prompt, true), GoldenInputIds(dir));
  EXPECT_EQ(tok->Decode(tok->Encode(prompt, false)), prompt);
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceCases,
                         ::testing::Values("tq-llama-21m", "tq-qwen3moe-17m"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace tq
