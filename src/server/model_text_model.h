// The real TextModel: the model directory's tokenizer, chat template, eos ids and generation
// defaults. (The real Engine is runtime/model_engine.h.)
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "server/text_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace tq::server {

class ModelTextModel : public TextModel {
 public:
  // tokenizer.json, tokenizer_config.json (chat template, special tokens), config.json and
  // generation_config.json of `dir`.
  static std::unique_ptr<ModelTextModel> Load(const std::string& dir, const ModelConfig& config);

  int64_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> Encode(const std::string& text, bool add_special) const override;
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string RenderChat(const nlohmann::ordered_json& messages,
                         const nlohmann::ordered_json& tools, bool add_generation_prompt,
                         const nlohmann::ordered_json& template_kwargs) const override;
  std::vector<int32_t> EosTokens() const override { return eos_; }
  bool IsSpecialToken(int32_t id) const override { return tokenizer_->IsSpecial(id); }
  std::string ChatTemplateSource() const override;
  SamplingParams DefaultSampling() const override { return defaults_; }

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  TokenizerConfig tok_config_;
  // Parsed templates by name ("" = the default; "tool_use" etc. when the model has them).
  std::map<std::string, ChatTemplate> templates_;
  int64_t vocab_ = 0;
  std::vector<int32_t> eos_;
  SamplingParams defaults_;
};

}  // namespace tq::server
