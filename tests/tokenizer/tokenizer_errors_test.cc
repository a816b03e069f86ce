// Broken tokenizer.json files and hostile input: a tq::Error naming the file and the problem,
// never a crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"

namespace tq {
namespace {

using nlohmann::json;

json MinimalTokenizer() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "unk_token": null, "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": ["a b"]}})");
}

// Loading `j` fails with a tq::Error whose message holds the file name and `needle`.
void ExpectLoadError(const std::string& text, const std::string& needle) {
  try {
    Tokenizer::FromJson(text, "bad/tokenizer.json");
    ADD_FAILURE() << "no error for: " << text.substr(0, 200);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad/tokenizer.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "want '" << needle << "' in: " << msg;
  }
}

TEST(TokenizerErrors, MinimalTokenizerLoads) {
  auto tok = Tokenizer::FromJson(MinimalTokenizer().dump(), "min");
  EXPECT_EQ(tok->Encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(tok->vocab_size(), 3);
}

TEST(TokenizerErrors, InvalidAndTruncatedJson) {
  ExpectLoadError("", "invalid JSON");
  ExpectLoadError("{\"model\": ", "invalid JSON");
  ExpectLoadError("[1, 2]", "must hold a JSON object");
  const std::string full = MinimalTokenizer().dump();
  for (size_t cut : {size_t(1), full.size() / 3, full.size() / 2, full.size() - 1}) {
    ExpectLoadError(full.substr(0, cut), "invalid JSON");
  }
}

TEST(TokenizerErrors, MissingOrUnsupportedModel) {
  json j = MinimalTokenizer();
  j.erase("model");
  ExpectLoadError(j.dump(), "missing 'model'");
  j = MinimalTokenizer();
  j["model"]["type"] = "WordPiece";
  ExpectLoadError(j.dump(), "unsupported model type 'WordPiece'");
  j = MinimalTokenizer();
  j["model"]["vocab"] = json::array();
  ExpectLoadError(j.dump(), "vocab");
  j = MinimalTokenizer();
  j["model"]["vocab"]["c"] = "three";
  ExpectLoadError(j.dump(), "vocab entry 'c'");
  j = MinimalTokenizer();
  j["model"]["vocab"]["c"] = -4;
  ExpectLoadError(j.dump(), "out of range");
  j = MinimalTokenizer();
  j["version"] = "2.0";
  ExpectLoadError(j.dump(), "version");
}

TEST(TokenizerErrors, BadMerges) {
  json j = MinimalTokenizer();
  j["model"]["merges"] = {"a z"};
  ExpectLoadError(j.dump(), "'z', which is not in the vocab");
  j["model"]["merges"] = {"b a"};  // "ba" is not in the vocab
  ExpectLoadError(j.dump(), "'ba', which is not in the vocab");
  j["model"]["merges"] = {"ab"};
  ExpectLoadError(j.dump(), "not two tokens");
  j["model"]["merges"] = json::array({json::array({"a"})});
  ExpectLoadError(j.dump(), "merge 0");
  j["model"]["merges"] = json::array({42});
  ExpectLoadError(j.dump(), "merge 0");
}

TEST(TokenizerErrors, UnknownComponentTypesNameTheType) {
  for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) {
    json j = MinimalTokenizer();
    j[key] = {{"type", "Frobnicate"}};
    ExpectLoadError(j.dump(), "unsupported " + std::string(key) + " type 'Frobnicate'");
    j[key] = {{"no_type", 1}};
    ExpectLoadError(j.dump(), "missing field 'type'");
  }
  json j = MinimalTokenizer();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "BertNormalizer"}}})}};
  ExpectLoadError(j.dump(), "unsupported normalizer type 'BertNormalizer'");
}

TEST(TokenizerErrors, BadComponentFields) {
  json j = MinimalTokenizer();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "(a"},
                                      "behavior": "Isolated", "invert": false})");
  ExpectLoadError(j.dump(), "bad regex");
  j["pre_tokenizer"]["pattern"] = {{"Regex", "a"}};
  j["pre_tokenizer"]["behavior"] = "Sideways";
  ExpectLoadError(j.dump(), "unknown split behavior 'Sideways'");
  j["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "ab"})");
  ExpectLoadError(j.dump(), "one character");
  j["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "_",
                                      "prepend_scheme": "sometimes"})");
  ExpectLoadError(j.dump(), "prepend_scheme");
  j = MinimalTokenizer();
  j["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"Glob": "*"}, "content": ""})");
  ExpectLoadError(j.dump(), "'String' or 'Regex'");
  j = MinimalTokenizer();
  j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A"}}],
      "special_tokens": {}})");
  ExpectLoadError(j.dump(), "missing SpecialToken '<s>'");
  j = MinimalTokenizer();
  j["decoder"] = json::parse(R"({"type": "Strip", "content": " ", "start": -1, "stop": 0})");
  ExpectLoadError(j.dump(), "out of range");
  j = MinimalTokenizer();
  j["added_tokens"] = json::parse(R"([{"id": 5, "special": true}])");
  ExpectLoadError(j.dump(), "missing field 'content'");
}

TEST(TokenizerErrors, DeepNestingIsRefused) {
  json n = {{"type", "Lowercase"}};
  for (int i = 0; i < 500; ++i) n = {{"type", "Sequence"}, {"normalizers", json::array({n})}};
  json j = MinimalTokenizer();
  j["normalizer"] = n;
  ExpectLoadError(j.dump(), "nested deeper");
}

TEST(TokenizerErrors, LoadNamesTheMissingFile) {
  try {
    Tokenizer::Load("/nonexistent/model");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model/tokenizer.json"), std::string::npos);
  }
}

TEST(TokenizerErrors, UnkTokenMissingFromVocabFailsAtEncode) {
  json j = MinimalTokenizer();
  j["model"]["unk_token"] = "<unk>";
  auto tok = Tokenizer::FromJson(j.dump(), "unk");
  EXPECT_EQ(tok->Encode("ab"), (std::vector<int32_t>{2}));
  EXPECT_THROW(tok->Encode("abc"), Error);
}

TEST(TokenizerErrors, InvalidUtf8InputIsReplaced) {
  for (const char* model : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    SCOPED_TRACE(model);
    auto tok = Tokenizer::Load(test::ModelDir(model));
    const std::string bad = std::string("ok \xff\xfe end \xe6\x97") + '\0' + "x\xc0\xaf";
    const auto ids = tok->Encode(bad, false);
    ASSERT_FALSE(ids.empty());
    // Each maximal invalid subpart became U+FFFD, as Python's errors="replace" does.
    EXPECT_EQ(tok->Decode(ids), std::string("ok \xEF\xBF\xBD\xEF\xBF\xBD end \xEF\xBF\xBD") + '\0' +
                                    "x\xEF\xBF\xBD\xEF\xBF\xBD");
    // Ids out of range decode to nothing rather than failing.
    const std::vector<int32_t> junk = {-5, 1 << 30, 65, 1 << 20};
    EXPECT_NO_THROW(tok->Decode(junk));
  }
}

}  // namespace
}  // namespace tq
