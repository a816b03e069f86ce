#include "runtime/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "io/model_config.h"

namespace tq {

SamplingParams SamplingParamsFromConfig(const GenerationConfig& gen) {
  SamplingParams p;
  if (gen.temperature) p.temperature = float(*gen.temperature);
  if (gen.top_p) p.top_p = float(*gen.top_p);
  if (gen.top_k) p.top_k = int32_t(*gen.top_k);
  if (gen.min_p) p.min_p = float(*gen.min_p);
  if (gen.repetition_penalty) p.repetition_penalty = float(*gen.repetition_penalty);
  // transformers: do_sample defaults to false, so a config without it decodes greedily.
  if (!gen.do_sample.value_or(false)) p.temperature = 0.0f;
  return p;
}

int32_t ArgMax(const float* values, int64_t n) {
  int64_t best = 0;
  float best_v = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (values[i] > best_v) {  // NaN never wins
      best_v = values[i];
      best = i;
    }
  }
  return int32_t(best);
}

Sampler::Sampler(const SamplingParams& params, int64_t vocab_size)
    : params_(params), vocab_(vocab_size) {
  TQ_CHECK(vocab_size > 0, "sampler", "vocabulary size must be positive (got {})", vocab_size);
  TQ_CHECK(params.top_k >= 0, "sampler", "top_k must be >= 0 (got {})", params.top_k);
  TQ_CHECK(params.top_p > 0.0f && params.top_p <= 1.0f, "sampler",
           "top_p must be in (0, 1] (got {})", params.top_p);
  TQ_CHECK(params.min_p >= 0.0f && params.min_p <= 1.0f, "sampler",
           "min_p must be in [0, 1] (got {})", params.min_p);
  TQ_CHECK(params.repetition_penalty > 0.0f, "sampler", "repetition_penalty must be > 0 (got {})",
           params.repetition_penalty);
  TQ_CHECK(std::isfinite(params.temperature), "sampler", "temperature must be finite");
  in_context_.assign(size_t(vocab_), 0);
  output_counts_.assign(size_t(vocab_), 0);
  touched_.reserve(size_t(vocab_));
  candidates_.resize(size_t(vocab_));
  probs_.resize(size_t(vocab_));
  Reset();
}

void Sampler::Reset() {
  for (int32_t t : touched_) {
    in_context_[size_t(t)] = 0;
    output_counts_[size_t(t)] = 0;
  }
  touched_.clear();
  rng_.seed(params_.seed);
}

void Sampler::AddPrompt(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab_) continue;  // the model rejects such ids; nothing to penalize
    if (!in_context_[size_t(t)]) {
      in_context_[size_t(t)] = 1;
      touched_.push_back(t);
    }
  }
}

void Sampler::Accept(int32_t t) {
  if (t < 0 || t >= vocab_) return;
  AddPrompt(std::span<const int32_t>(&t, 1));
  output_counts_[size_t(t)]++;
}

void Sampler::ApplyPenalties(float* logits) const {
  const float rep = params_.repetition_penalty;
  const bool use_rep = rep != 1.0f;
  const bool use_pf = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!use_rep && !use_pf) return;
  for (int32_t t : touched_) {
    float& l = logits[t];
    if (use_rep) l = l > 0 ? l / rep : l * rep;
    const int32_t c = output_counts_[size_t(t)];
    if (use_pf && c > 0) l -= params_.presence_penalty + params_.frequency_penalty * float(c);
  }
}

namespace {

// Buckets of d = s_i - s_max <= 0 (log-probability relative to the best token), 1/8 nat wide over
// [-32, 0]; everything below -32 (and NaN) falls in the last one. Monotone: a larger d never gets
// a larger bucket, so "bucket <= b" selects every token at least as likely as any token of b.
constexpr int kBuckets = 257;
constexpr float kBucketsPerNat = 8.0f;

inline int Bucket(float d) {
  const float x = -d * kBucketsPerNat;
  return x < float(kBuckets - 1) ? int(x) : kBuckets - 1;  // x >= 0 (or -0); NaN -> last
}

}  // namespace

int64_t Sampler::Filter(const float* logits, double* total) {
  const float inv_t = 1.0f / params_.temperature;
  float max_l = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab_; ++i) max_l = std::max(max_l, logits[i]);
  const float max_s = max_l * inv_t;
  // min-p in log space: p_i >= min_p * p_max  <=>  s_i - s_max >= log(min_p).
  const float min_p_log =
      params_.min_p > 0.0f ? std::log(params_.min_p) : -std::numeric_limits<float>::infinity();
  auto* c = candidates_.data();
  auto greater = [](const auto& a, const auto& b) { return a.first > b.first; };
  const bool use_top_k = params_.top_k > 0 && params_.top_k < vocab_;
  const bool use_top_p = params_.top_p < 1.0f;
  int64_t n = 0;
  double z = 0.0;  // normaliser of the distribution top-p sees (after top-k)
  if (use_top_k) {
    // Count tokens per bucket, then select only the buckets that hold the k best: nth_element
    // then runs over that prefix instead of the whole vocabulary. Same set, same order.
    std::array<int64_t, kBuckets> count{};
    for (int64_t i = 0; i < vocab_; ++i) count[size_t(Bucket(logits[i] * inv_t - max_s))]++;
    const int64_t k = params_.top_k;
    int last = 0;  // the counts add up to vocab_ > k, so this stops at the last bucket at worst
    int64_t seen = count[0];
    while (seen < k) seen += count[size_t(++last)];
    for (int64_t i = 0; i < vocab_; ++i) {
      if (Bucket(logits[i] * inv_t - max_s) <= last) c[n++] = {logits[i], int32_t(i)};
    }
    std::nth_element(c, c + k - 1, c + n, greater);
    std::sort(c, c + k, greater);
    n = k;
    for (int64_t i = 0; i < n; ++i) {
      c[i].first = std::exp(c[i].first * inv_t - max_s);
      z += c[i].first;
    }
  } else if (!use_top_p) {
    // No top-p: the normaliser is not needed, so tokens below min-p cost no exp.
    for (int64_t i = 0; i < vocab_; ++i) {
      const float d = logits[i] * inv_t - max_s;
      if (d >= min_p_log) c[n++] = {std::exp(d), int32_t(i)};
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += c[i].first;
    *total = sum;
    return n;  // unsorted: the draw walks them in vocabulary order
  } else {
    // Top-p needs the mass of the whole vocabulary. Tokens at least kFirstCut as likely as the
    // best are collected on the way; when they carry the nucleus's mass (the usual case), the
    // nucleus is among them and only they are sorted.
    constexpr float kFirstCut = 1.0f / 1024;
    float* p = probs_.data();
    double first_mass = 0.0;
    int64_t below = 0;  // min-p survivors under the cut
    for (int64_t i = 0; i < vocab_; ++i) {
      const float d = logits[i] * inv_t - max_s;
      p[i] = std::exp(d);
      z += p[i];
      if (d >= min_p_log) {
        if (p[i] >= kFirstCut) {
          c[n++] = {p[i], int32_t(i)};
          first_mass += p[i];
        } else {
          ++below;
        }
      }
    }
    // The walk below sums in another order: ask for a little more than top_p * z.
    const double want = double(params_.top_p) * z * (1.0 + 1e-6);
    if (below > 0 && !(first_mass >= want)) {
      // A flat distribution: a histogram of the mass by bucket tells which buckets can hold the
      // nucleus (one bucket extra for rounding), and only those tokens are collected.
      std::array<double, kBuckets> mass{};
      for (int64_t i = 0; i < vocab_; ++i) mass[size_t(Bucket(logits[i] * inv_t - max_s))] += p[i];
      int last = kBuckets - 1;
      double seen = 0.0;
      for (int b = 0; b < kBuckets - 1; ++b) {
        seen += mass[size_t(b)];
        if (seen >= want) {
          last = std::min(b + 1, kBuckets - 1);
          break;
        }
      }
      n = 0;
      for (int64_t i = 0; i < vocab_; ++i) {
        const float d = logits[i] * inv_t - max_s;
        if (d >= min_p_log && Bucket(d) <= last) c[n++] = {p[i], int32_t(i)};
      }
    }
    std::sort(c, c + n, greater);
  }
  // Walk in descending order: keep a token while the mass strictly before it is < top_p
  // (HF: drop tokens whose ascending cumulative mass is <= 1 - top_p), and while p >= min_p*p_max.
  const double p_limit = double(params_.top_p) * z;
  const float min_keep = params_.min_p > 0.0f ? params_.min_p : 0.0f;  // relative to p_max = 1
  double before = 0.0;
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (use_top_p && before >= p_limit && i > 0) break;
    if (c[i].first < min_keep && i > 0) break;
    before += c[i].first;
    kept = i + 1;
  }
  *total = before;
  return kept;
}

int32_t Sampler::Sample(float* logits) {
  ApplyPenalties(logits);
  if (params_.temperature <= 0.0f || params_.top_k == 1) return ArgMax(logits, vocab_);
  double total = 0.0;
  const int64_t n = Filter(logits, &total);
  if (n <= 0 || !(total > 0.0)) return ArgMax(logits, vocab_);  // all -inf or NaN
  // A portable uniform draw in [0, total): 53 random bits.
  const double u = double(rng_() >> 11) * 0x1.0p-53 * total;
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    acc += candidates_[size_t(i)].first;
    if (u < acc) return candidates_[size_t(i)].second;
  }
  return candidates_[size_t(n - 1)].second;
}

void Sampler::FilterMask(const float* logits, std::vector<bool>* keep) {
  keep->assign(size_t(vocab_), false);
  if (params_.temperature <= 0.0f || params_.top_k == 1) {
    (*keep)[size_t(ArgMax(logits, vocab_))] = true;
    return;
  }
  double total = 0.0;
  const int64_t n = Filter(logits, &total);
  for (int64_t i = 0; i < n; ++i) (*keep)[size_t(candidates_[size_t(i)].second)] = true;
}

}  // namespace tq
