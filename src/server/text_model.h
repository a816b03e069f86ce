// The text side of a served model: tokenizer, chat template and generation defaults. The HTTP
// layer only talks to this and to the Scheduler, so it can be tested with a fake.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace tq::server {

class TextModel {
 public:
  virtual ~TextModel() = default;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> Encode(const std::string& text, bool add_special) const = 0;
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // The chat template applied to normalized messages (see api_request.h). Errors (a template
  // that raises, a missing template) are tq::Error; the server answers 400 with the message.
  virtual std::string RenderChat(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const nlohmann::ordered_json& template_kwargs) const = 0;
  virtual std::vector<int32_t> EosTokens() const = 0;
  // An added token with special=true (masked out of constrained output unless a grammar names it).
  virtual bool IsSpecialToken(int32_t /*id*/) const { return false; }
  // The default chat template's source ("" when none): the tool-call family is read from it.
  virtual std::string ChatTemplateSource() const { return ""; }
  // Sampling used for fields a request leaves out (generation_config.json).
  virtual SamplingParams DefaultSampling() const = 0;
};

}  // namespace tq::server
