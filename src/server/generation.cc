#include "server/generation.h"

#include <algorithm>

namespace tq::server {

// Runs on the scheduler thread.
class ChoiceSink : public TextSink {
 public:
  ChoiceSink(std::shared_ptr<Generation> gen, size_t index, std::span<const int32_t> prompt,
             const Generation::SinkOptions& opts)
      : TextSink(
            [text = &gen->text_, keep = opts.tools != ToolFamily::kNone](
                std::span<const int32_t> ids) { return text->Decode(ids, /*skip_special=*/!keep); },
            opts.stop, prompt),
        gen_(std::move(gen)),
        index_(index),
        logprobs_(opts.logprobs),
        family_(opts.tools),
        parallel_(opts.parallel_tool_calls),
        tools_(opts.tools) {}

  bool Cancelled() const override { return gen_->cancelled(); }

 protected:
  bool OnText(int32_t token, std::string_view piece, const TokenLogprobs* lp) override {
    std::string text(piece);
    std::vector<ToolCallOut> calls;
    if (family_ != ToolFamily::kNone) {
      ToolCallStream::Delta d = tools_.Push(text);
      text = std::move(d.content);
      calls = Release(std::move(d.calls));
    }
    LogprobEntry entry;
    if (logprobs_ && lp) {
      entry.token = gen_->piece_(token);
      entry.logprob = lp->logprob;
      for (const auto& [t, p] : lp->top) entry.top.emplace_back(gen_->piece_(t), p);
    }
    {
      std::lock_guard lk(gen_->mu_);
      ChoiceOutput& c = gen_->choices_[index_];
      c.text.append(text);
      for (auto& call : calls) c.tool_calls.push_back(std::move(call));
      if (logprobs_ && lp) c.logprobs.push_back(std::move(entry));
      gen_->news_ = true;
    }
    gen_->cv_.notify_all();
    return true;
  }

  void OnEnd(FinishReason reason, std::string_view end, const SequenceStats& stats,
             const std::string& error) override {
    std::string tail(end);
    std::vector<ToolCallOut> calls;
    if (family_ != ToolFamily::kNone) {
      ToolCallStream::Delta d = tools_.Push(tail);
      ToolCallStream::Delta f = tools_.Finish();
      tail = std::move(d.content) + f.content;
      for (auto& call : f.calls) d.calls.push_back(std::move(call));
      calls = Release(std::move(d.calls));
    }
    {
      std::lock_guard lk(gen_->mu_);
      ChoiceOutput& c = gen_->choices_[index_];
      c.text.append(tail);
      for (auto& call : calls) c.tool_calls.push_back(std::move(call));
      c.finished = true;
      c.reason = reason;
      c.stats = stats;
      c.error = error;
      gen_->news_ = true;
    }
    gen_->cv_.notify_all();
  }

 private:
  // Gives calls their ids; drops those beyond the first when parallel calls are off.
  std::vector<ToolCallOut> Release(std::vector<ToolCall> calls) {
    std::vector<ToolCallOut> out;
    for (auto& c : calls) {
      if (!parallel_ && released_ > 0) break;
      ++released_;
      out.push_back({NewToolCallId(family_), std::move(c)});
    }
    return out;
  }

  std::shared_ptr<Generation> gen_;
  size_t index_;
  bool logprobs_;
  ToolFamily family_;
  bool parallel_;
  ToolCallStream tools_;
  size_t released_ = 0;
};

Generation::Generation(const TextModel& text, size_t num_choices)
    : text_(text), piece_(text), num_choices_(num_choices), choices_(num_choices) {}

std::shared_ptr<SequenceSink> Generation::MakeSink(size_t index, std::span<const int32_t> prompt,
                                                   const SinkOptions& opts) {
  return std::make_shared<ChoiceSink>(shared_from_this(), index, prompt, opts);
}

bool Generation::Take(std::vector<ChoiceOutput>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return news_; });
  news_ = false;
  out.resize(choices_.size());
  bool all = true;
  for (size_t i = 0; i < choices_.size(); ++i) {
    ChoiceOutput& c = choices_[i];
    ChoiceOutput& o = out[i];
    o.text = std::move(c.text);
    c.text.clear();
    o.tool_calls = std::move(c.tool_calls);
    c.tool_calls.clear();
    o.logprobs = std::move(c.logprobs);
    c.logprobs.clear();
    o.finished = c.finished;
    o.reason = c.reason;
    o.stats = c.stats;
    o.error = c.error;
    all = all && c.finished;
  }
  return all;
}

std::vector<ChoiceOutput> Generation::WaitAll() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] {
    for (const auto& c : choices_) {
      if (!c.finished) return false;
    }
    return true;
  });
  return choices_;
}

}  // namespace tq::server
