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

TEST(ChatPrompt, NoTemplateIsAnError) {
  TokenizerConfig cfg;
  EXPECT_THROW(RenderChatPrompt(cfg, nlohmann::ordered_json::array()), Error);
}

}  // namespace
}  // namespace tq
