#include "runtime/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/progress.h"
#include "core/sysinfo.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace tq {

double LogSumExp(const float* x, int64_t n) { return kernels::LogSumExp(x, n); }

double NegLogLikelihood(const float* logits, int64_t vocab, int32_t target) {
  return LogSumExp(logits, vocab) - double(logits[target]);
}

PerplexityResult ComputePerplexity(Model& model, std::span<const int32_t> tokens,
                                   const PerplexityOptions& opts) {
  TQ_CHECK(opts.ctx >= 2, "perplexity", "--ctx must be at least 2 (got {})", opts.ctx);
  TQ_CHECK(opts.max_tokens >= 2, "perplexity", "--max-tokens must be at least 2 (got {})",
           opts.max_tokens);
  const int64_t vocab = model.vocab_size();
  const int64_t n = std::min<int64_t>(int64_t(tokens.size()), opts.max_tokens);
  TQ_CHECK(n >= 2, "perplexity", "the text has {} tokens; at least 2 are needed", tokens.size());
  for (int64_t i = 0; i < n; ++i) {
    TQ_CHECK(tokens[size_t(i)] >= 0 && tokens[size_t(i)] < vocab, "perplexity",
             "token id {} at position {} is outside the vocabulary [0, {})", tokens[size_t(i)], i,
             vocab);
  }
  int64_t rows = opts.logit_rows;
  if (rows <= 0) rows = std::clamp<int64_t>((int64_t(256) << 20) / (vocab * 4), 1, opts.ctx);
  rows = std::min(rows, opts.ctx);

  KvCacheOptions kv = opts.kv;
  kv.max_tokens = opts.ctx;
  auto cache = model.NewCache(kv);
  std::vector<float> logits(size_t(rows * vocab));  // [rows, vocab]

  const int64_t windows = (n + opts.ctx - 1) / opts.ctx;
  ProgressBar bar("perplexity", windows, opts.progress);
  Timer timer;
  double nll_sum = 0.0;
  int64_t predicted = 0;
  for (int64_t w = 0; w < windows; ++w) {
    const int64_t begin = w * opts.ctx;
    const int64_t len = std::min(opts.ctx, n - begin);
    cache->Truncate(0);
    // Row r of a chunk starting at position p predicts the token at p + r + 1.
    for (int64_t p = 0; p < len; p += rows) {
      const int64_t m = std::min(rows, len - p);
      model.Forward(tokens.subspan(size_t(begin + p), size_t(m)), *cache, logits.data(), true);
      for (int64_t r = 0; r < m && p + r + 1 < len; ++r) {
        nll_sum +=
            NegLogLikelihood(logits.data() + r * vocab, vocab, tokens[size_t(begin + p + r + 1)]);
        predicted++;
      }
    }
    if (predicted > 0) {
      bar.Update(w + 1, fmt::format("ppl {:.4f}", std::exp(nll_sum / double(predicted))));
    }
  }
  TQ_CHECK(predicted > 0, "perplexity", "no token was predicted (windows of one token)");
  PerplexityResult res;
  res.nll = nll_sum / double(predicted);
  res.ppl = std::exp(res.nll);
  res.tokens = predicted;
  res.input_tokens = n;
  res.windows = windows;
  res.seconds = timer.Seconds();
  bar.Finish(fmt::format("ppl {:.4f}", res.ppl));
  return res;
}

}  // namespace tq
