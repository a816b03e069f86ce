#include "runtime/generator.h"

#include <algorithm>

#include "core/error.h"
#include "core/sysinfo.h"
#include "io/model_config.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/model_engine.h"
#include "runtime/scheduler.h"
#include "runtime/text_sink.h"
#include "tokenizer/tokenizer.h"

namespace tq {

namespace {

// The Generator's sink: streamed text to the callback, the generated ids, the end's reason and
// stats, an exception to rethrow.
class CallbackSink : public TextSink {
 public:
  CallbackSink(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
               const GenerateOptions& opts, const Generator::TextCallback& on_text)
      : TextSink([&tokenizer, skip = opts.skip_special_tokens](
                     std::span<const int32_t> ids) { return tokenizer.Decode(ids, skip); },
                 opts.stop, prompt),
        on_text_(on_text) {}

  bool Cancelled() const override { return cancelled_; }
  void OnException(std::exception_ptr e) override { exception_ = e; }

  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  SequenceStats stats;
  std::string error;
  std::exception_ptr exception_;

 protected:
  bool OnText(int32_t token, std::string_view text, const TokenLogprobs*) override {
    tokens.push_back(token);
    if (text.empty() || !on_text_ || on_text_(text)) return true;
    cancelled_ = true;
    return false;
  }
  void OnEnd(FinishReason r, std::string_view tail, const SequenceStats& st,
             const std::string& err) override {
    if (!tail.empty() && on_text_) on_text_(tail);  // the end: nothing left to cancel
    reason = r;
    stats = st;
    error = err;
  }

 private:
  const Generator::TextCallback& on_text_;
  bool cancelled_ = false;
};

}  // namespace

Generator::Generator(Model& model, const Tokenizer& tokenizer, std::vector<int32_t> eos_ids)
    : model_(model), tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)) {}

GenerateStats Generator::Generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                                  KvCache& cache, const TextCallback& on_text,
                                  std::vector<int32_t>* tokens_out) {
  TQ_CHECK(!prompt.empty(), "generate", "the prompt is empty (no tokens)");
  TQ_CHECK(int64_t(prompt.size()) < cache.capacity(), "generate",
           "the prompt is {} tokens but the KV cache holds {} (no room for a generated token)",
           prompt.size(), cache.capacity());
  const int64_t vocab = model_.vocab_size();
  for (int32_t t : prompt) {
    TQ_CHECK(t >= 0 && t < vocab, "generate",
             "prompt token id {} is outside the vocabulary [0, {})", t, vocab);
  }
  GenerateStats st;
  st.prompt_tokens = int64_t(prompt.size());
  if (tokens_out) tokens_out->clear();
  if (opts.max_tokens <= 0) {
    st.finish = FinishReason::kLength;
    return st;
  }
  cache.Truncate(0);

  // The server's scheduler with one slot, driven on this thread.
  ModelEngine engine(model_, cache);
  Scheduler scheduler(
      engine, {.parallel = 1,
               .max_queue = 1,
               .prefill_chunk = std::max<int64_t>(1, std::min(prefill_chunk_, cache.max_append())),
               .own_thread = false});
  auto sink = std::make_shared<CallbackSink>(tokenizer_, prompt, opts, on_text);
  SequenceRequest req;
  req.prompt.assign(prompt.begin(), prompt.end());
  req.max_tokens = opts.max_tokens;
  req.sampler = std::make_unique<RuntimeSampler>(opts.sampling, vocab, prompt);
  req.eos_tokens = eos_ids_;
  req.sink = sink;
  std::vector<SequenceRequest> reqs;
  reqs.push_back(std::move(req));
  TQ_CHECK(scheduler.Submit(std::move(reqs)), "generate", "the scheduler refused the sequence");
  scheduler.RunUntilIdle();

  if (sink->exception_) std::rethrow_exception(sink->exception_);
  if (sink->reason == FinishReason::kError) throw Error("generate", sink->error);
  const SequenceStats& s = sink->stats;
  st.generated_tokens = s.completion_tokens;
  st.decode_steps = s.decode_steps;
  st.prefill_seconds = std::max(0.0, s.ttft_seconds - s.queue_seconds);
  st.decode_seconds = std::max(0.0, s.total_seconds - s.ttft_seconds);
  st.finish = sink->reason;
  if (tokens_out) *tokens_out = std::move(sink->tokens);
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
