#include "runtime/chat.h"

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer_config.h"

namespace tq {

std::string RenderChatPrompt(const TokenizerConfig& config, const nlohmann::ordered_json& messages,
                             bool add_generation_prompt, const nlohmann::ordered_json& tools) {
  if (config.chat_template.empty() && config.named_templates.empty()) {
    throw Error("chat", "the model has no chat_template in tokenizer_config.json; use --prompt");
  }
  const bool has_tools = !tools.is_null();  // HF: tools=None vs a list ([] included)
  const ChatTemplate tmpl =
      ChatTemplate::Parse(SelectChatTemplate(config, has_tools), "chat_template");
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  extra["bos_token"] = config.bos_token.value_or("");
  extra["eos_token"] = config.eos_token.value_or("");
  return tmpl.Render(messages, tools, add_generation_prompt, extra);
}

}  // namespace tq
