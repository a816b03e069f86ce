#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tq {
namespace {

// 1 / base^(2i/dim) with torch's fp32 arithmetic.
std::vector<float> DefaultInvFreq(double base, int64_t dim) {
  std::vector<float> f(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float e = float(2 * i) / float(dim);
    const float p = float(std::pow(double(float(base)), double(e)));
    f[size_t(i)] = 1.0f / p;
  }
  return f;
}

void ApplyLlama3(const RopeScaling& rs, std::vector<float>& inv_freq) {
  const float factor = float(rs.factor);
  const float low = float(rs.low_freq_factor), high = float(rs.high_freq_factor);
  const float old_ctx = float(rs.original_max_position_embeddings);
  TQ_CHECK(old_ctx > 0 && high != low, "rope llama3",
           "needs original_max_position_embeddings > 0 and high_freq_factor != low_freq_factor");
  const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  constexpr float kPi = float(M_PI);
  for (float& f : inv_freq) {
    const float wavelen = 2.0f * kPi / f;
    const float scaled = wavelen > low_wavelen ? f / factor : f;  // inv_freq_llama
    if (wavelen < high_wavelen || wavelen > low_wavelen) {
      f = scaled;
    } else {
      const float smooth = (old_ctx / wavelen - low) / (high - low);
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    }
  }
}

RopeFrequencies Yarn(const ModelConfig& cfg, int64_t dim) {
  const RopeScaling& rs = cfg.rope_scaling;
  const double base = cfg.rope_theta;
  // The config's factor scales the frequencies and the attention factor (as the YaRN paper and
  // vLLM do); original_max_position_embeddings (io fills in max_position_embeddings when absent)
  // sets the correction range.
  const double factor = rs.factor;
  const double original_max =
      double(rs.original_max_position_embeddings > 0 ? rs.original_max_position_embeddings
                                                     : cfg.max_position_embeddings);
  auto get_mscale = [](double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
  };
  RopeFrequencies out;
  if (rs.attention_factor) {
    out.attention_factor = float(*rs.attention_factor);
  } else if (rs.mscale && rs.mscale_all_dim && *rs.mscale != 0 && *rs.mscale_all_dim != 0) {
    out.attention_factor =
        float(get_mscale(factor, *rs.mscale) / get_mscale(factor, *rs.mscale_all_dim));
  } else {
    out.attention_factor = float(get_mscale(factor, 1.0));
  }
  const double beta_fast = rs.beta_fast != 0 ? rs.beta_fast : 32.0;
  const double beta_slow = rs.beta_slow != 0 ? rs.beta_slow : 1.0;
  auto correction_dim = [&](double rotations) {
    return (double(dim) * std::log(original_max / (rotations * 2 * M_PI))) / (2 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (rs.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // prevent a singular ramp
  const std::vector<float> pos = [&] {
    std::vector<float> p(size_t(dim / 2));
    for (int64_t i = 0; i < dim / 2; ++i)
      p[size_t(i)] = float(std::pow(double(float(base)), double(float(2 * i) / float(dim))));
    return p;
  }();
  out.inv_freq.resize(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float extrapolation = 1.0f / pos[size_t(i)];
    const float interpolation = 1.0f / (float(factor) * pos[size_t(i)]);
    const float ramp = std::clamp((float(i) - float(low)) / (float(high) - float(low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    out.inv_freq[size_t(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return out;
}

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const ModelConfig& cfg, int64_t dim) {
  TQ_CHECK(dim > 0 && dim % 2 == 0, "rope", "rotary dimension must be even and positive, got {}",
           dim);
  TQ_CHECK(cfg.rope_theta > 0, "rope", "rope_theta must be positive, got {}", cfg.rope_theta);
  const RopeScaling& rs = cfg.rope_scaling;
  RopeFrequencies out;
  switch (rs.type) {
    case RopeScaling::Type::kNone:
    // Dynamic NTK equals the default up to max_position_embeddings, the most a cache holds here.
    case RopeScaling::Type::kDynamic:
    // Proportional (gemma4): the default frequencies of the full head_dim; the layer spec rotates
    // only the first partial_rotary_factor of the pairs.
    case RopeScaling::Type::kProportional:
      out.inv_freq = DefaultInvFreq(cfg.rope_theta, dim);
      return out;
    case RopeScaling::Type::kLinear:
      TQ_CHECK(rs.factor > 0, "rope linear", "factor must be positive, got {}", rs.factor);
      out.inv_freq = DefaultInvFreq(cfg.rope_theta, dim);
      for (float& f : out.inv_freq) f /= float(rs.factor);
      return out;
    case RopeScaling::Type::kLlama3:
      TQ_CHECK(rs.factor > 0, "rope llama3", "factor must be positive, got {}", rs.factor);
      out.inv_freq = DefaultInvFreq(cfg.rope_theta, dim);
      ApplyLlama3(rs, out.inv_freq);
      return out;
    case RopeScaling::Type::kYarn:
      TQ_CHECK(rs.factor > 0, "rope yarn", "factor must be positive, got {}", rs.factor);
      return Yarn(cfg, dim);
  }
  Fail("rope", "unknown rope scaling type");
}

}  // namespace tq
