// Chat prompts: a conversation rendered with the model's chat template (tokenizer_config.json),
// with bos_token / eos_token bound as the template expects. The result already holds the special
// tokens, so it must be encoded with add_special_tokens = false.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tq {

struct TokenizerConfig;

// `messages` is [{"role": ..., "content": ...}, ...]; `tools` a list, or null for Python's None
// (a list, even [], selects a "tool_use" template). Object keys keep their order (ordered_json),
// so `tojson` prints them as Hugging Face does. Throws tq::Error when the model has no template.
std::string RenderChatPrompt(const TokenizerConfig& config, const nlohmann::ordered_json& messages,
                             bool add_generation_prompt = true,
                             const nlohmann::ordered_json& tools = nlohmann::ordered_json());

}  // namespace tq
