#include "runtime/generator.h"

#include <algorithm>

#include "core/error.h"
#include "core/sysinfo.h"
#include "io/model_config.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tq {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "none";
}

Sequence::Sequence(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                   const GenerateOptions& opts, std::span<const int32_t> eos_ids,
                   int64_t vocab_size)
    : prompt_tokens_(int64_t(prompt.size())),
      max_tokens_(opts.max_tokens),
      eos_ids_(eos_ids.begin(), eos_ids.end()),
      sampler_(opts.sampling, vocab_size),
      text_([&tokenizer, skip = opts.skip_special_tokens](
                std::span<const int32_t> ids) { return tokenizer.Decode(ids, skip); },
            opts.stop, prompt) {
  sampler_.AddPrompt(prompt);
  generated_.reserve(size_t(std::max<int64_t>(0, std::min<int64_t>(max_tokens_, 1 << 16))));
  if (max_tokens_ <= 0) reason_ = FinishReason::kLength;
}

int32_t Sequence::Sample(float* logits) { return sampler_.Sample(logits); }

void Sequence::FlushInto(std::string* out) {
  if (text_.Finish(out)) reason_ = FinishReason::kStop;
}

std::string_view Sequence::Append(int32_t token) {
  out_.clear();
  if (finished()) return out_;
  generated_.push_back(token);
  sampler_.Accept(token);
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
    reason_ = FinishReason::kEos;
    FlushInto(&out_);
    if (reason_ == FinishReason::kStop) return out_;
    reason_ = FinishReason::kEos;
    return out_;
  }
  const auto r = text_.Push(token);
  out_.append(r.text);
  if (r.stopped) {
    reason_ = FinishReason::kStop;
    return out_;
  }
  if (int64_t(generated_.size()) >= max_tokens_) {
    reason_ = FinishReason::kLength;
    FlushInto(&out_);
  }
  return out_;
}

std::string_view Sequence::Finish(FinishReason reason) {
  out_.clear();
  if (finished()) return out_;
  reason_ = reason;
  if (reason == FinishReason::kCancelled) return out_;
  FlushInto(&out_);
  return out_;
}

Generator::Generator(Model& model, const Tokenizer& tokenizer, std::vector<int32_t> eos_ids)
    : model_(model), tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)) {
  logits_.resize(size_t(model.vocab_size()));
}

GenerateStats Generator::Generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                                  KvCache& cache, const TextCallback& on_text,
                                  std::vector<int32_t>* tokens_out) {
  TQ_CHECK(!prompt.empty(), "generate", "the prompt is empty (no tokens)");
  TQ_CHECK(int64_t(prompt.size()) <= cache.capacity(), "generate",
           "the prompt is {} tokens but the KV cache holds {}", prompt.size(), cache.capacity());
  const int64_t vocab = model_.vocab_size();
  for (int32_t t : prompt) {
    TQ_CHECK(t >= 0 && t < vocab, "generate",
             "prompt token id {} is outside the vocabulary [0, {})", t, vocab);
  }
  GenerateStats st;
  st.prompt_tokens = int64_t(prompt.size());
  Sequence seq(tokenizer_, prompt, opts, eos_ids_, vocab);
  cache.Truncate(0);

  Timer timer;
  for (size_t b = 0; b < prompt.size(); b += size_t(prefill_chunk_)) {
    const size_t n = std::min(prompt.size() - b, size_t(prefill_chunk_));
    model_.Forward(prompt.subspan(b, n), cache, logits_.data());
  }
  st.prefill_seconds = timer.Seconds();

  auto emit = [&](std::string_view text) {
    if (text.empty() || !on_text) return true;
    return on_text(text);
  };
  timer.Reset();
  while (!seq.finished()) {
    const int32_t token = seq.Sample(logits_.data());
    if (!emit(seq.Append(token))) {
      seq.Finish(FinishReason::kCancelled);
      break;
    }
    if (seq.finished()) break;
    if (cache.size() >= cache.capacity()) {
      emit(seq.Finish(FinishReason::kLength));
      break;
    }
    model_.Forward(std::span<const int32_t>(&token, 1), cache, logits_.data());
    st.decode_steps++;
  }
  st.decode_seconds = timer.Seconds();
  st.generated_tokens = int64_t(seq.generated().size());
  st.finish = seq.finish_reason();
  if (tokens_out) *tokens_out = seq.generated();
  return st;
}

std::vector<int32_t> CollectEosIds(const ModelConfig& config, const GenerationConfig& gen,
                                   const Tokenizer& tokenizer,
                                   const std::optional<std::string>& eos_token) {
  std::vector<int64_t> ids(gen.eos_token_ids.begin(), gen.eos_token_ids.end());
  ids.insert(ids.end(), config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (eos_token) {
    if (auto id = tokenizer.TokenToId(*eos_token)) ids.push_back(*id);
  }
  std::vector<int32_t> out;
  const int64_t vocab = std::max(config.vocab_size, tokenizer.vocab_size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab) continue;
    if (std::find(out.begin(), out.end(), int32_t(id)) == out.end()) out.push_back(int32_t(id));
  }
  return out;
}

int64_t FitToContext(std::vector<int32_t>* prompt, int64_t max_tokens, int64_t ctx, bool truncate,
                     int64_t* dropped) {
  if (dropped) *dropped = 0;
  TQ_CHECK(ctx > 1, "context", "the context must be at least 2 tokens (got {})", ctx);
  const int64_t n = int64_t(prompt->size());
  if (n >= ctx) {
    if (!truncate) {
      throw Error("context", fmt::format("the prompt is {} tokens, which does not fit the context "
                                         "of {} tokens (at least one token must be generated)",
                                         n, ctx));
    }
    // Keep the last tokens, leaving room for the generation (at least half the context for the
    // prompt when the budget is larger than that).
    const int64_t keep = std::max<int64_t>(std::min(ctx - 1, ctx - max_tokens), ctx / 2);
    if (dropped) *dropped = n - keep;
    prompt->erase(prompt->begin(), prompt->end() - keep);
  }
  return std::min(max_tokens, ctx - int64_t(prompt->size()));
}

}  // namespace tq
