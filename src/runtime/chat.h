// Chat prompts: a conversation rendered with the model's chat template (tokenizer_config.json),
// with bos_token / eos_token bound as the template expects. The result already holds the special
// tokens, so it must be encoded with add_special_tokens = false.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tq {

struct TokenizerConfig;

// `messages` is [{"role": ..., "content": ...}, ...]; throws tq::Error when the model has no
// chat template.
std::string RenderChatPrompt(const TokenizerConfig& config, const nlohmann::json& messages,
                             bool add_generation_prompt = true,
                             const nlohmann::json& tools = nlohmann::json());

}  // namespace tq
