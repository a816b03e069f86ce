// One HTTP request's generation as the HTTP thread sees it: one Choice per prompt, filled by
// ChoiceSinks on the scheduler thread (streaming detokenization + stop strings happen there, so
// a stop string ends the sequence at once) and drained by the HTTP thread that answers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/text_sink.h"
#include "server/text_model.h"
#include "server/token_text.h"
#include "server/tool_calls.h"

namespace tq::server {

struct LogprobEntry {
  std::string token;  // the text the token adds (leading-space marker decoded; specials kept)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

// A parsed tool call with the id the response gives it.
struct ToolCallOut {
  std::string id;
  ToolCall call;
};

struct ChoiceOutput {
  std::string text;                     // new text since the last Take
  std::vector<ToolCallOut> tool_calls;  // calls released since the last Take
  std::vector<LogprobEntry> logprobs;   // new entries since the last Take
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  SequenceStats stats;
  std::string error;
};

// Always held by shared_ptr (the sinks keep it alive while the scheduler holds them).
class Generation : public std::enable_shared_from_this<Generation> {
 public:
  Generation(const TextModel& text, size_t num_choices);

  // What a sink does with the tokens of its choice.
  struct SinkOptions {
    std::vector<std::string> stop;
    bool logprobs = false;
    // Tool calls are parsed out of the text in this family's syntax (kNone: plain text). The
    // text is then decoded with special tokens kept, since most families' markers are special.
    ToolFamily tools = ToolFamily::kNone;
    bool parallel_tool_calls = true;  // false: calls after the first are dropped
  };
  // A sink for choice `index`; `prompt` seeds the detokenizer's context.
  std::shared_ptr<SequenceSink> MakeSink(size_t index, std::span<const int32_t> prompt,
                                         const SinkOptions& opts);
  std::shared_ptr<SequenceSink> MakeSink(size_t index, std::span<const int32_t> prompt,
                                         const std::vector<std::string>& stop, bool logprobs) {
    SinkOptions o;
    o.stop = stop;
    o.logprobs = logprobs;
    return MakeSink(index, prompt, o);
  }

  // Waits up to `timeout` for news, then moves every choice's new text/logprobs into `out`
  // (finish state copied). Returns true when every choice has finished.
  bool Take(std::vector<ChoiceOutput>& out, std::chrono::milliseconds timeout);
  // Waits for every choice to finish and returns everything.
  std::vector<ChoiceOutput> WaitAll();

  // The client is gone: the scheduler drops the sequences at its next step.
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  size_t num_choices() const { return num_choices_; }

 private:
  friend class ChoiceSink;
  const TextModel& text_;
  const TokenText piece_;  // logprobs' token strings
  const size_t num_choices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ChoiceOutput> choices_;  // pending output, guarded by mu_
  bool news_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tq::server
