#include "server/model_text_model.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/generator.h"

namespace tq::server {

std::unique_ptr<ModelTextModel> ModelTextModel::Load(const std::string& dir,
                                                     const ModelConfig& config) {
  auto t = std::unique_ptr<ModelTextModel>(new ModelTextModel());
  t->tokenizer_ = Tokenizer::Load(dir);
  t->vocab_ = config.vocab_size;
  const GenerationConfig gen = LoadGenerationConfig(dir);
  t->defaults_ = SamplingParamsFromConfig(gen);
  t->tok_config_ = LoadTokenizerConfig(dir);
  // The same ids `turboquant generate` stops on.
  t->eos_ = CollectEosIds(config, gen, *t->tokenizer_, t->tok_config_.eos_token);
  // Parse every template now: a broken one fails at startup, not on the first request.
  if (!t->tok_config_.chat_template.empty()) {
    t->templates_.emplace("", ChatTemplate::Parse(t->tok_config_.chat_template, "chat_template"));
  }
  for (const auto& [name, source] : t->tok_config_.named_templates) {
    t->templates_.emplace(name, ChatTemplate::Parse(source, "chat_template " + name));
  }
  return t;
}

std::string ModelTextModel::ChatTemplateSource() const {
  // The one tool requests render with (RenderChat picks "tool_use" when it exists).
  if (auto it = tok_config_.named_templates.find("tool_use");
      it != tok_config_.named_templates.end()) {
    return it->second;
  }
  return tok_config_.chat_template;
}

std::vector<int32_t> ModelTextModel::Encode(const std::string& text, bool add_special) const {
  return tokenizer_->Encode(text, add_special);
}

std::string ModelTextModel::Decode(std::span<const int32_t> ids, bool skip_special) const {
  return tokenizer_->Decode(ids, skip_special);
}

std::string ModelTextModel::RenderChat(const nlohmann::ordered_json& messages,
                                       const nlohmann::ordered_json& tools,
                                       bool add_generation_prompt,
                                       const nlohmann::ordered_json& template_kwargs) const {
  // As transformers' apply_chat_template: `tools` is None when the request has none, and the
  // list as given otherwise ([] included), which also selects a "tool_use" template.
  const bool has_tools = !tools.is_null();
  const ChatTemplate* tmpl = nullptr;
  if (has_tools && templates_.count("tool_use")) {
    tmpl = &templates_.at("tool_use");
  } else if (templates_.count("")) {
    tmpl = &templates_.at("");
  } else if (templates_.count("default")) {
    tmpl = &templates_.at("default");
  }
  if (!tmpl) {
    Fail("chat template",
         "this model has no chat template (tokenizer_config.json); use /v1/completions");
  }
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (tok_config_.bos_token) extra["bos_token"] = *tok_config_.bos_token;
  if (tok_config_.eos_token) extra["eos_token"] = *tok_config_.eos_token;
  if (tok_config_.unk_token) extra["unk_token"] = *tok_config_.unk_token;
  if (tok_config_.pad_token) extra["pad_token"] = *tok_config_.pad_token;
  if (template_kwargs.is_object()) {
    for (const auto& [k, v] : template_kwargs.items()) extra[k] = v;
  }
  return tmpl->Render(messages, tools, add_generation_prompt, extra);
}

}  // namespace tq::server
