#include "convert/self_text.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "model/model.h"

namespace tq {
namespace {

// A token drawn from softmax(logits [vocab] / temperature); p is scratch [vocab].
int32_t Draw(const float* logits, int64_t vocab, double temperature, std::vector<double>& p,
             quant::SplitMix64& rng) {
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += p[size_t(v)] = std::exp(double(logits[v] - mx) / temperature);
  double u = rng.Uniform() * sum;
  for (int64_t v = 0; v < vocab; ++v) {
    u -= p[size_t(v)];
    if (u <= 0) return int32_t(v);
  }
  return int32_t(vocab - 1);
}

}  // namespace

void SampleContinuation(Model& model, std::vector<int32_t>& s, double temperature,
                        quant::SplitMix64& rng) {
  TQ_CHECK(temperature > 0 && !s.empty(), "self text", "temperature {} for {} tokens", temperature,
           s.size());
  const int64_t vocab = model.vocab_size();
  KvCacheOptions kv;
  kv.max_tokens = int64_t(s.size());
  kv.dtype = KvDType::kF32;
  auto cache = model.NewCache(kv);
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::vector<double> p(static_cast<size_t>(vocab));
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    model.Forward(std::span<const int32_t>(&s[i], 1), *cache, logits.data());
    s[i + 1] = Draw(logits.data(), vocab, temperature, p, rng);
  }
}

void SampleContinuations(Model& model, std::vector<std::vector<int32_t>>& seqs,
                         std::span<const double> temperatures, quant::SplitMix64& rng) {
  TQ_CHECK(!seqs.empty() && !temperatures.empty(), "self text", "{} sequences, {} temperatures",
           seqs.size(), temperatures.size());
  const size_t len = seqs[0].size();
  for (const auto& s : seqs)
    TQ_CHECK(s.size() == len && len > 0, "self text", "sequences of {} and {} tokens", len,
             s.size());
  for (double t : temperatures) TQ_CHECK(t > 0, "self text", "temperature {}", t);
  if (seqs.size() == 1) return SampleContinuation(model, seqs[0], temperatures[0], rng);
  const int64_t vocab = model.vocab_size(), n = int64_t(seqs.size());
  KvCacheOptions kv;
  kv.max_tokens = int64_t(len);
  kv.dtype = KvDType::kF32;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<KvCache*> ptrs;
  for (int64_t k = 0; k < n; ++k) {
    caches.push_back(model.NewCache(kv));
    ptrs.push_back(caches.back().get());
  }
  std::vector<float> logits(size_t(n * vocab));
  std::vector<double> p(static_cast<size_t>(vocab));
  std::vector<int32_t> step(static_cast<size_t>(n));
  for (size_t i = 0; i + 1 < len; ++i) {
    for (int64_t k = 0; k < n; ++k) step[size_t(k)] = seqs[size_t(k)][i];
    model.DecodeBatch(step, ptrs, logits.data());
    for (int64_t k = 0; k < n; ++k)
      seqs[size_t(k)][i + 1] = Draw(logits.data() + k * vocab, vocab,
                                    temperatures[size_t(k) % temperatures.size()], p, rng);
  }
}

}  // namespace tq
