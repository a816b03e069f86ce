// The public Tokenizer API on the two shared models: id/token lookups, special tokens, skipping
// them in Decode, thread safety, and long inputs (the whole eval file as one word for llama).
#include <gtest/gtest.h>

#include <thread>

#include "core/mapped_file.h"
#include "testutil/testutil.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer.h"

namespace tq {
namespace {

TEST(TokenizerApi, LookupsOnLlama) {
  auto tok = Tokenizer::Load(test::ModelDir("tq-llama-21m"));
  EXPECT_EQ(tok->vocab_size(), 8191);  // ids 0..8190 (the config pads the embedding to 8192)
  EXPECT_EQ(tok->TokenToId("<s>"), 1);
  EXPECT_EQ(tok->TokenToId("</s>"), 2);
  EXPECT_EQ(tok->TokenToId("<0x41>"), tok->TokenToId("<0x41>").value());
  EXPECT_FALSE(tok->TokenToId("no such token").has_value());
  EXPECT_EQ(tok->IdToToken(1), "<s>");
  EXPECT_EQ(tok->IdToToken(-1), "");
  EXPECT_EQ(tok->IdToToken(1 << 30), "");
  EXPECT_TRUE(tok->IsSpecial(0));
  EXPECT_TRUE(tok->IsSpecial(1));
  EXPECT_TRUE(tok->IsSpecial(2));
  EXPECT_FALSE(tok->IsSpecial(697));
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    const std::string t = tok->IdToToken(id);
    ASSERT_FALSE(t.empty()) << id;
    EXPECT_EQ(tok->TokenToId(t), id);
  }
  const std::vector<int32_t> ids = {1, 697, 713, 341, 2170, 2};
  EXPECT_EQ(tok->Decode(ids, false), "<s> Hello world</s>");
  EXPECT_EQ(tok->Decode(ids, true), "Hello world");
}

TEST(TokenizerApi, LookupsOnQwen) {
  auto tok = Tokenizer::Load(test::ModelDir("tq-qwen3moe-17m"));
  EXPECT_EQ(tok->vocab_size(), 8192);
  EXPECT_EQ(tok->TokenToId("<|im_end|>"), 2);
  EXPECT_TRUE(tok->IsSpecial(2));
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, 4676, 201, 5249, 2}, true), "user\nhi");
  EXPECT_TRUE(tok->Encode("").empty());
}

TEST(TokenizerApi, ConcurrentEncodesAgree) {
  auto tok = Tokenizer::Load(test::ModelDir("tq-qwen3moe-17m"));
  const std::string text = ReadFileToString(test::EvalFile("eval_brown.txt")).substr(0, 60000);
  const auto want = tok->Encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { got[t] = tok->Encode(text); });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

// With no pre-tokenizer, llama encodes a whole file as one BPE word; it is cut where no merge
// can reach across. That must equal the plain merge loop over the whole text.
TEST(TokenizerApi, LongWordChunkingEqualsPlainMerging) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  auto model = tok::BpeModel::FromJson(
      nlohmann::json::parse(ReadFileToString(dir + "/tokenizer.json")).at("model"), "llama");
  std::string text = ReadFileToString(test::EvalFile("eval_brown.txt")).substr(0, 200000);
  std::string word;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ') {
      word += "\xE2\x96\x81";  // the normalizer's space -> U+2581
    } else {
      word += text[i];
    }
  }
  word += "\xF0\x9F\x99\x82 \xE6\x97\xA5";  // byte-fallback and unk characters
  std::vector<int32_t> chunked, plain;
  model->Tokenize(word, chunked);
  model->TokenizeUnchunked(word, plain);
  EXPECT_EQ(chunked, plain);
  EXPECT_GT(chunked.size(), 10000u);
}

}  // namespace
}  // namespace tq
