#include "runtime/engine.h"

#include <algorithm>

#include "core/error.h"

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
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

void Engine::Step(std::span<const int32_t> tokens, std::span<const Part> parts, float* logits) {
  const size_t vocab = size_t(vocab_size());
  // Output row of each part (-1: none); one-token parts are decoded together afterwards.
  int64_t begin = 0, row = 0;
  step_tokens_.clear();
  step_caches_.clear();
  std::vector<int64_t> decode_rows;
  for (const Part& p : parts) {
    TQ_CHECK(p.count >= 1 && begin + p.count <= int64_t(tokens.size()), "engine step",
             "part of {} tokens at {} overflows the {} tokens given", p.count, begin,
             tokens.size());
    const std::span<const int32_t> mine = tokens.subspan(size_t(begin), size_t(p.count));
    begin += p.count;
    const int64_t out = p.logits ? row++ : -1;
    if (!p.prompt) {
      TQ_CHECK(p.count == 1, "engine step", "a decode part has {} tokens", p.count);
      step_tokens_.push_back(mine[0]);
      step_caches_.push_back(p.cache);
      decode_rows.push_back(out);
      continue;
    }
    if (out >= 0) {
      Prefill(p.cache, mine, logits + size_t(out) * vocab);
    } else {
      step_logits_.resize(vocab);
      Prefill(p.cache, mine, step_logits_.data());
    }
  }
  if (step_tokens_.empty()) return;
  step_logits_.resize(step_tokens_.size() * vocab);
  Decode(step_tokens_, step_caches_, step_logits_.data());
  for (size_t b = 0; b < decode_rows.size(); ++b) {
    if (decode_rows[b] < 0) continue;
    std::copy_n(step_logits_.data() + b * vocab, vocab, logits + size_t(decode_rows[b]) * vocab);
  }
}

}  // namespace tq
