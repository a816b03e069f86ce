// tokenizer_config.json parsing: special tokens as strings or AddedToken objects, flags, and the
// string / list-of-named-templates / chat_template.jinja forms of the chat template.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer_config.h"

namespace tq {
namespace {

TEST(ChatTokenizerConfig, SharedModels) {
  const TokenizerConfig llama = LoadTokenizerConfig(test::ModelDir("tq-llama-21m"));
  EXPECT_EQ(llama.bos_token, "<s>");
  EXPECT_EQ(llama.eos_token, "</s>");
  EXPECT_EQ(llama.unk_token, "<unk>");
  EXPECT_FALSE(llama.pad_token.has_value());
  EXPECT_TRUE(llama.add_bos_token);
  EXPECT_FALSE(llama.add_eos_token);
  EXPECT_NE(llama.chat_template.find("[INST]"), std::string::npos);

  const TokenizerConfig qwen = LoadTokenizerConfig(test::ModelDir("tq-qwen3moe-17m"));
  EXPECT_FALSE(qwen.bos_token.has_value());  // "bos_token": null
  EXPECT_EQ(qwen.eos_token, "<|im_end|>");
  EXPECT_EQ(qwen.pad_token, "<|endoftext|>");
  EXPECT_FALSE(qwen.add_bos_token);
  EXPECT_NE(qwen.chat_template.find("<|im_start|>"), std::string::npos);
}

TEST(ChatTokenizerConfig, AddedTokenObjectsAndNamedTemplates) {
  const TokenizerConfig c = ParseTokenizerConfig(R"({
    "bos_token": {"__type": "AddedToken", "content": "<|begin|>", "lstrip": false},
    "eos_token": "<|end|>", "add_eos_token": true,
    "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]
  })",
                                                 "cfg");
  EXPECT_EQ(c.bos_token, "<|begin|>");
  EXPECT_EQ(c.eos_token, "<|end|>");
  EXPECT_TRUE(c.add_eos_token);
  EXPECT_EQ(c.chat_template, "D");
  ASSERT_EQ(c.named_templates.size(), 2u);
  EXPECT_EQ(c.named_templates.at("tool_use"), "T");
  EXPECT_EQ(SelectChatTemplate(c, false), "D");
  EXPECT_EQ(SelectChatTemplate(c, true), "T");
  EXPECT_EQ(SelectChatTemplate(c, false, "tool_use"), "T");
  EXPECT_THROW(SelectChatTemplate(c, false, "rag"), Error);
  EXPECT_THROW(SelectChatTemplate(TokenizerConfig{}, false), Error);
  const TokenizerConfig o =
      ParseTokenizerConfig(R"({"chat_template": {"default": "D2", "rag": "R"}})", "cfg");
  EXPECT_EQ(o.chat_template, "D2");
  EXPECT_EQ(o.named_templates.at("rag"), "R");
  EXPECT_THROW(ParseTokenizerConfig(R"({"chat_template": {"x": 1}})", "cfg"), Error);
}

TEST(ChatTokenizerConfig, MalformedInputNamesTheField) {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      ParseTokenizerConfig(text, "my/tokenizer_config.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("{").find("[my/tokenizer_config.json] invalid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"bos_token": 5})").find("'bos_token'"), std::string::npos);
  EXPECT_NE(error_of(R"({"eos_token": {"x": 1}})").find("'eos_token'"), std::string::npos);
  EXPECT_NE(error_of(R"({"add_bos_token": "yes"})").find("'add_bos_token'"), std::string::npos);
  EXPECT_NE(error_of(R"({"chat_template": 3})").find("'chat_template'"), std::string::npos);
  EXPECT_NE(error_of(R"({"chat_template": [{"name": "x"}]})").find("chat_template[0]"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"chat_template": null, "pad_token": null})"), "");
}

TEST(ChatTokenizerConfig, DirectoryLayouts) {
  test::TempDir dir;
  // No files at all: an empty config.
  TokenizerConfig empty = LoadTokenizerConfig(dir.path().string());
  EXPECT_TRUE(empty.chat_template.empty());
  EXPECT_FALSE(empty.eos_token.has_value());
  // Newer layout: the template in chat_template.jinja, the json without one.
  test::WriteFile(dir.file("tokenizer_config.json"), R"({"eos_token": "<e>"})");
  test::WriteFile(dir.file("chat_template.jinja"), "{{ messages|length }}\n");
  TokenizerConfig c = LoadTokenizerConfig(dir.path().string());
  EXPECT_EQ(c.eos_token, "<e>");
  EXPECT_EQ(c.chat_template, "{{ messages|length }}\n");
  // A template inside the json wins over the file.
  test::WriteFile(dir.file("tokenizer_config.json"), R"({"chat_template": "J"})");
  EXPECT_EQ(LoadTokenizerConfig(dir.path().string()).chat_template, "J");
  // additional_chat_templates/<name>.jinja add named templates.
  std::filesystem::create_directory(dir.file("additional_chat_templates"));
  test::WriteFile(dir.file("additional_chat_templates/tool_use.jinja"), "TOOLS");
  EXPECT_EQ(LoadTokenizerConfig(dir.path().string()).named_templates.at("tool_use"), "TOOLS");
  // A broken json file is an error naming it.
  test::WriteFile(dir.file("tokenizer_config.json"), "{oops");
  try {
    LoadTokenizerConfig(dir.path().string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace tq
