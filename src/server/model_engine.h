// The real Engine and TextModel: a tq::Model with a pool of KV caches, and the model directory's
// tokenizer, chat template and generation defaults.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "server/engine.h"
#include "server/text_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace tq::server {

class ModelEngine : public Engine {
 public:
  // `num_caches` caches of opts.max_tokens tokens each, allocated on first use.
  ModelEngine(Model& model, int num_caches, const KvCacheOptions& opts);

  int64_t vocab_size() const override { return model_.vocab_size(); }
  int64_t context_length() const override { return opts_.max_tokens; }
  int num_caches() const override { return int(caches_.size()); }
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  int64_t kv_bytes_held() const override;  // KvCache::MemoryBytes over the caches
  std::optional<DeviceMemory> device_memory() const override;
  void Truncate(int cache, int64_t n) override;
  int64_t ReusablePrefix(int cache, int64_t n) override;
  void Prefill(int cache, std::span<const int32_t> tokens, float* logits) override;
  void Decode(std::span<const int32_t> tokens, std::span<const int> caches, float* logits) override;
  // Model::ForwardBatch: decode rows and prompt chunks in one pass over the weights.
  void Step(std::span<const int32_t> tokens, std::span<const Part> parts, float* logits) override;

 private:
  KvCache& Cache(int c);

  Model& model_;
  const KvCacheOptions opts_;
  std::vector<std::unique_ptr<KvCache>> caches_;
  std::vector<KvCache*> batch_;                // scratch for Decode
  std::vector<Model::BatchPart> batch_parts_;  // scratch for Step
  int64_t bytes_per_token_ = 0;
};

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
