#include "runtime/text_sink.h"

#include <utility>

namespace tq {

TextSink::TextSink(DecodeFn decode, std::vector<std::string> stop, std::span<const int32_t> prompt)
    : stream_(std::move(decode), std::move(stop), prompt) {}

bool TextSink::OnToken(int32_t token, const TokenLogprobs* logprobs) {
  const StopStringMatcher::Result r = stream_.Push(token);
  const bool more = OnText(token, r.text, logprobs);
  return more && !r.stopped;
}

void TextSink::OnFinish(FinishReason reason, const SequenceStats& stats, const std::string& error) {
  std::string tail;
  if (reason != FinishReason::kError && reason != FinishReason::kCancelled &&
      stream_.Finish(&tail)) {
    reason = FinishReason::kStop;
  }
  OnEnd(reason, tail, stats, error);
}

RuntimeSampler::RuntimeSampler(const SamplingParams& params, int64_t vocab,
                               std::span<const int32_t> prompt)
    : sampler_(params, vocab) {
  sampler_.AddPrompt(prompt);
}

int32_t RuntimeSampler::Sample(std::span<float> logits) {
  const int32_t t = sampler_.Sample(logits.data());
  sampler_.Accept(t);
  return t;
}

}  // namespace tq
