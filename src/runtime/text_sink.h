// The sequence sinks of the one generation stack: TextSink turns a sequence's tokens into the
// text a reader may see (TextStream: streaming detokenizer + stop strings) and decides what a
// stop string means for the sequence, the same way for the server's per-choice sinks
// (server/generation.cc) and the Generator's callback (runtime/generator.cc). RuntimeSampler is
// tq::Sampler as the scheduler's TokenSampler.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/text_stream.h"

namespace tq {

class TextSink : public SequenceSink {
 public:
  // `prompt` anchors the detokenizer (leading-space rules); `stop` ends the text just before the
  // first completed stop string.
  TextSink(DecodeFn decode, std::vector<std::string> stop, std::span<const int32_t> prompt);

  // Pushes the token through the text stream, then OnText. False (the scheduler finishes the
  // sequence) when a stop string completed or OnText said so.
  bool OnToken(int32_t token, const TokenLogprobs* logprobs) final;
  // Releases the held-back text (unless cancelled or failed): a stop string completing in it
  // turns the reason into kStop. Then OnEnd.
  void OnFinish(FinishReason reason, const SequenceStats& stats, const std::string& error) final;

 protected:
  // `text`: what `token` made visible (may be empty). False stops the sequence (kStop), or
  // cancels it when Cancelled() is true by then.
  virtual bool OnText(int32_t token, std::string_view text, const TokenLogprobs* logprobs) = 0;
  // The end, called once: `tail` is the text released at the end.
  virtual void OnEnd(FinishReason reason, std::string_view tail, const SequenceStats& stats,
                     const std::string& error) = 0;

 private:
  TextStream stream_;
};

// tq::Sampler as the scheduler's TokenSampler (prompt tokens count for repetition penalty).
class RuntimeSampler : public TokenSampler {
 public:
  RuntimeSampler(const SamplingParams& params, int64_t vocab, std::span<const int32_t> prompt);
  int32_t Sample(std::span<float> logits) override;

 private:
  Sampler sampler_;
};

}  // namespace tq
