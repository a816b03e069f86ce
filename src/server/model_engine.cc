#include "server/model_engine.h"

#include <algorithm>

#include "core/error.h"

namespace tq::server {

ModelEngine::ModelEngine(Model& model, int num_caches, const KvCacheOptions& opts)
    : model_(model), opts_(opts), caches_(size_t(num_caches)) {
  TQ_CHECK(num_caches >= 1, "serve", "need at least one KV cache");
  batch_.reserve(size_t(num_caches));
  bytes_per_token_ = Cache(0).BytesPerToken();
}

KvCache& ModelEngine::Cache(int c) {
  auto& p = caches_.at(size_t(c));
  if (!p) p = model_.NewCache(opts_);
  return *p;
}

std::optional<Engine::DeviceMemory> ModelEngine::device_memory() const {
  kernels::Backend& be = model_.backend();
  if (be.memory_space() != MemorySpace::kDevice) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  be.MemoryInfo(&free_bytes, &total_bytes);
  return DeviceMemory{std::string(be.name()), int64_t(free_bytes), int64_t(total_bytes)};
}

int64_t ModelEngine::kv_bytes_held() const {
  int64_t bytes = 0;
  for (const auto& c : caches_)
    if (c) bytes += c->MemoryBytes();
  return bytes;
}

void ModelEngine::Truncate(int cache, int64_t n) {
  KvCache& kv = Cache(cache);
  if (n < kv.size()) kv.Truncate(n);
}

int64_t ModelEngine::ReusablePrefix(int cache, int64_t n) {
  const auto& p = caches_.at(size_t(cache));
  if (!p || n <= 0) return 0;
  return p->ReusablePrefix(n);  // sliding windows and recurrent-state snapshots (kv_cache.h)
}

void ModelEngine::Prefill(int cache, std::span<const int32_t> tokens, float* logits) {
  model_.Forward(tokens, Cache(cache), logits, /*all_logits=*/false);
}

void ModelEngine::Decode(std::span<const int32_t> tokens, std::span<const int> caches,
                         float* logits) {
  batch_.clear();
  for (int c : caches) batch_.push_back(&Cache(c));
  model_.DecodeBatch(tokens, batch_, logits);
}

void ModelEngine::Step(std::span<const int32_t> tokens, std::span<const Part> parts,
                       float* logits) {
  batch_parts_.clear();
  for (const Part& p : parts) batch_parts_.push_back({&Cache(p.cache), p.count, p.logits});
  model_.ForwardBatch(tokens, batch_parts_, logits);
}

std::unique_ptr<ModelTextModel> ModelTextModel::Load(const std::string& dir,
                                                     const ModelConfig& config) {
  auto t = std::unique_ptr<ModelTextModel>(new ModelTextModel());
  t->tokenizer_ = Tokenizer::Load(dir);
  t->vocab_ = config.vocab_size;
  const GenerationConfig gen = LoadGenerationConfig(dir);
  t->defaults_ = SamplingParamsFromConfig(gen);
  auto add_eos = [&](int64_t id) {
    if (id >= 0 && id < t->vocab_ &&
        std::find(t->eos_.begin(), t->eos_.end(), int32_t(id)) == t->eos_.end()) {
      t->eos_.push_back(int32_t(id));
    }
  };
  for (int64_t id : config.eos_token_ids) add_eos(id);
  for (int64_t id : gen.eos_token_ids) add_eos(id);
  t->tok_config_ = LoadTokenizerConfig(dir);
  if (t->tok_config_.eos_token) {
    if (auto id = t->tokenizer_->TokenToId(*t->tok_config_.eos_token)) add_eos(*id);
  }
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
