// tokenizer_config.json: special tokens, add_bos/eos flags and chat templates.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace tq {

struct TokenizerConfig {
  // Content strings; the file may give a string or an AddedToken object {"content": ...}.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  bool add_bos_token = false, add_eos_token = false;
  std::string chat_template;  // the default one ("" if none)
  // The list-of-{name, template} form (every entry, "default" included), e.g. "tool_use", plus
  // additional_chat_templates/<name>.jinja files.
  std::map<std::string, std::string> named_templates;
};

// Throws tq::Error("[<where>] ...") naming the field on malformed input.
TokenizerConfig ParseTokenizerConfig(const std::string& json_text, const std::string& where);

// <dir>/tokenizer_config.json (absent -> empty config). When the json has no template, also reads
// <dir>/chat_template.jinja (newer HF layout) or <dir>/chat_template.json.
TokenizerConfig LoadTokenizerConfig(const std::string& model_dir);

// The template Hugging Face would pick: `name` when given (error if missing), else "tool_use"
// when tools are passed and the model has one, else the default. Throws when there is none.
const std::string& SelectChatTemplate(const TokenizerConfig& config, bool has_tools,
                                      const std::string& name = "");

}  // namespace tq
