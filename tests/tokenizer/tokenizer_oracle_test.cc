// Hand-made tokenizer.json files for the components the shared models do not use (Metaspace,
// Digits, Split behaviours, added-token flags, BPE options, Bert/Roberta processing, ...), with
// the outputs the `tokenizers` library itself gives (tokenizer_oracle_gen.py made the data).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer_oracle_data.h"

namespace tq {
namespace {

nlohmann::json OracleSpecs() {
  std::string all;
  for (const char* chunk : kOracleChunks) all += chunk;
  return nlohmann::json::parse(all);
}

class Oracle : public ::testing::TestWithParam<size_t> {};

TEST(OracleData, HasManySpecs) { EXPECT_GE(OracleSpecs().size(), 30u); }

TEST(Oracle, EveryHandMadeTokenizerMatchesTokenizers) {
  const auto specs = OracleSpecs();
  for (const auto& spec : specs) {
    const std::string name = spec.at("name");
    SCOPED_TRACE("tokenizer " + name);
    std::unique_ptr<Tokenizer> tok;
    ASSERT_NO_THROW(tok = Tokenizer::FromJson(spec.at("tokenizer").dump(), name));
    for (const auto& c : spec.at("cases")) {
      const std::string text = c.at("text");
      SCOPED_TRACE("text \"" + text + "\"");
      const auto ids = c.at("ids").get<std::vector<int32_t>>();
      EXPECT_EQ(tok->Encode(text, true), ids);
      EXPECT_EQ(tok->Encode(text, false), c.at("ids_no_special").get<std::vector<int32_t>>());
      EXPECT_EQ(tok->Decode(ids, false), c.at("decoded").get<std::string>());
      EXPECT_EQ(tok->Decode(ids, true), c.at("decoded_skip").get<std::string>());
    }
  }
}

}  // namespace
}  // namespace tq
