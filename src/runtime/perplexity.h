// Perplexity with the protocol of ../shared/models/README.md: the first `max_tokens` tokens of
// the text (tokenized without special tokens), non-overlapping windows of `ctx` tokens (the last
// one shorter), each window from an empty cache with no BOS, mean negative log-likelihood over
// every predicted token (ctx - 1 per full window), log-softmax in double precision.
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_cache.h"

namespace tq {

class Model;

struct PerplexityOptions {
  int64_t ctx = 512;
  int64_t max_tokens = 65536;
  KvCacheOptions kv;  // max_tokens is set to ctx
  bool progress = true;
  // Rows of logits computed per Forward call (bounds the [rows, vocab] buffer); 0 = a whole
  // window unless that exceeds ~256 MB.
  int64_t logit_rows = 0;
};

struct PerplexityResult {
  double ppl = 0;
  double nll = 0;  // mean negative log-likelihood (nats)
  // Predicted tokens, whose likelihoods are averaged (reference.json's "tokens": 65408 for 65536
  // input tokens in windows of 512).
  int64_t tokens = 0;
  int64_t input_tokens = 0;  // tokens evaluated (<= max_tokens)
  int64_t windows = 0;
  double seconds = 0;
};

PerplexityResult ComputePerplexity(Model& model, std::span<const int32_t> tokens,
                                   const PerplexityOptions& opts);

// -log softmax(logits)[target] = LogSumExp(logits) - logits[target].
double NegLogLikelihood(const float* logits, int64_t vocab, int32_t target);
// log(sum_i e^x[i]) over x [n], n >= 1: the max in float, e^(x - max) with a 16-lane float exp
// (~2e-7 relative) summed per block of 256 in float and across blocks in double.
double LogSumExp(const float* x, int64_t n);

}  // namespace tq
