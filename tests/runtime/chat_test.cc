// RenderChatPrompt (generate --chat) keeps object key order and passes tools as transformers does.
#include "runtime/chat.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/tokenizer_config.h"

namespace tq {
namespace {

TEST(ChatPrompt, ToolsAndMessagesKeepKeyOrder) {
  TokenizerConfig cfg;
  cfg.chat_template = "{{ bos_token }}{{ tools | tojson }}|{{ messages | tojson }}";
  cfg.bos_token = "<s>";
  const auto tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}])");
  const nlohmann::ordered_json messages =
      nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(RenderChatPrompt(cfg, messages, true, tools),
            R"(<s>[{"type": "function", "function": {"name": "f", "parameters": {"type": )"
            R"("object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": )"
            R"("integer"}}}}}]|[{"role": "user", "content": "hi"}])");
}

TEST(ChatPrompt, ToolsNoneOrList) {
  TokenizerConfig cfg;
  cfg.chat_template = "{% if tools is none %}none{% else %}{{ tools | length }}{% endif %}";
  const auto msgs = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "x"}}});
  EXPECT_EQ(RenderChatPrompt(cfg, msgs), "none");
  EXPECT_EQ(RenderChatPrompt(cfg, msgs, true, nlohmann::ordered_json::array()), "0");
  cfg.chat_template = "plain";
  cfg.named_templates = {{"tool_use", "tools"}};
  EXPECT_EQ(RenderChatPrompt(cfg, msgs), "plain");
  EXPECT_EQ(RenderChatPrompt(cfg, msgs, true, nlohmann::ordered_json::array()), "tools");
}

TEST(ChatPrompt, NoTemplateIsAnError) {
  TokenizerConfig cfg;
  EXPECT_THROW(RenderChatPrompt(cfg, nlohmann::ordered_json::array()), Error);
}

}  // namespace
}  // namespace tq
