// The shared models' chat renderings (reference.json, produced by transformers'
// apply_chat_template) must be reproduced exactly from their tokenizer_config.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "testutil/testutil.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer_config.h"

namespace tq {
namespace {

void CheckModel(const std::string& model) {
  const std::string dir = test::ModelDir(model);
  const auto ref =
      nlohmann::ordered_json::parse(ReadFileToString(test::RequireFile(dir + "/reference.json")));
  const TokenizerConfig config = LoadTokenizerConfig(dir);
  ASSERT_FALSE(config.chat_template.empty());
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (config.bos_token) extra["bos_token"] = *config.bos_token;
  if (config.eos_token) extra["eos_token"] = *config.eos_token;
  const ChatTemplate tmpl = ChatTemplate::Parse(config.chat_template);
  const std::string out = tmpl.Render(ref.at("chat_messages"), nullptr, true, extra);
  EXPECT_EQ(out, ref.at("chat_rendered").get<std::string>());
  // Rendering twice from the same parsed template gives the same text.
  EXPECT_EQ(tmpl.Render(ref.at("chat_messages"), nullptr, true, extra), out);
}

TEST(ChatReference, Llama) { CheckModel("tq-llama-21m"); }
TEST(ChatReference, Qwen3Moe) { CheckModel("tq-qwen3moe-17m"); }

TEST(ChatReference, GenerationPromptMatters) {
  const std::string dir = test::ModelDir("tq-qwen3moe-17m");
  const TokenizerConfig config = LoadTokenizerConfig(dir);
  const ChatTemplate tmpl = ChatTemplate::Parse(config.chat_template);
  const auto msgs = nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(tmpl.Render(msgs, nullptr, false), "<|im_start|>user\nhi<|im_end|>\n");
  EXPECT_EQ(tmpl.Render(msgs, nullptr, true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace tq
