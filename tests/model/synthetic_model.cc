#include "synthetic_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/half.h"
#include "io/safetensors.h"
#include "testutil/testutil.h"

namespace tq::test {
namespace {

bool IsMoe(const SynthSpec& s) { return s.experts > 0; }
bool IsMixtral(const SynthSpec& s) { return s.model_type == "mixtral"; }
bool HasQkNorm(const SynthSpec& s) {
  return s.model_type == "qwen3" || s.model_type == "qwen3_moe";
}
bool HasQkvBias(const SynthSpec& s) { return s.model_type == "qwen2" || s.attention_bias; }
bool HasOBias(const SynthSpec& s) { return s.model_type != "qwen2" && s.attention_bias; }
bool LayerIsMoe(const SynthSpec& s, int64_t l) {
  if (!IsMoe(s)) return false;
  if (std::count(s.mlp_only_layers.begin(), s.mlp_only_layers.end(), l)) return false;
  return (l + 1) % s.decoder_sparse_step == 0;
}
int64_t LayerWindow(const SynthSpec& s, int64_t l) {
  if (s.sliding_window <= 0) return 0;
  if (s.model_type == "mistral" || s.model_type == "mixtral") return s.sliding_window;
  return l >= s.max_window_layers ? s.sliding_window : 0;
}
std::string L(int64_t l) { return fmt::format("model.layers.{}.", l); }

std::string ConfigJson(const SynthSpec& s) {
  std::string j = fmt::format(
      R"({{"architectures": ["X"], "model_type": "{}", "vocab_size": {}, "hidden_size": {},
  "intermediate_size": {}, "num_hidden_layers": {}, "num_attention_heads": {},
  "num_key_value_heads": {}, "head_dim": {}, "hidden_act": "silu", "max_position_embeddings": {},
  "rms_norm_eps": 1e-06, "rope_theta": {}, "rope_scaling": {}, "tie_word_embeddings": {},
  "attention_bias": {}, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32")",
      s.model_type, s.vocab, s.hidden, s.ffn, s.layers, s.heads, s.kv_heads, s.head_dim,
      s.max_position_embeddings, s.rope_theta, s.rope_scaling, s.tie, s.attention_bias);
  if (s.sliding_window > 0) {
    j += fmt::format(R"(, "sliding_window": {}, "use_sliding_window": true,
  "max_window_layers": {})",
                     s.sliding_window, s.max_window_layers);
  } else {
    j += R"(, "sliding_window": null, "use_sliding_window": false)";
  }
  if (IsMixtral(s)) {  // experts are intermediate_size wide; no moe_intermediate_size key
    j.replace(j.find("\"intermediate_size\": "),
              std::string("\"intermediate_size\": ").size() + std::to_string(s.ffn).size(),
              fmt::format("\"intermediate_size\": {}", s.moe_ffn));
    j += fmt::format(R"(, "num_local_experts": {}, "num_experts_per_tok": {})", s.experts, s.top_k);
  } else if (IsMoe(s)) {
    const char* experts_key = IsMixtral(s) ? "num_local_experts" : "num_experts";
    j += fmt::format(R"(, "{}": {}, "num_experts_per_tok": {}, "moe_intermediate_size": {},
  "norm_topk_prob": {}, "decoder_sparse_step": {}, "mlp_only_layers": [{}])",
                     experts_key, s.experts, s.top_k, s.moe_ffn, s.norm_topk_prob,
                     s.decoder_sparse_step, fmt::join(s.mlp_only_layers, ", "));
  }
  return j + "}\n";
}

}  // namespace

TensorMap WriteSyntheticModel(const SynthSpec& s, const std::string& dir, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::string, Shape>> decl;
  TensorMap t;
  auto add = [&](const std::string& name, Shape shape, float mean, float stddev) {
    std::normal_distribution<float> d(mean, stddev);
    std::vector<float> v(static_cast<size_t>(NumElements(shape)));
    for (float& x : v) {
      x = d(rng);
      if (s.dtype == DType::BF16) x = Bf16ToF32(F32ToBf16(x));
      if (s.dtype == DType::F16) x = F16ToF32(F32ToF16(x));
    }
    t[name] = std::move(v);
    decl.emplace_back(name, std::move(shape));
  };
  const int64_t h = s.hidden, qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  add("model.embed_tokens.weight", {s.vocab, h}, 0, 1);
  add("model.norm.weight", {h}, 1, 0.1f);
  if (!s.tie) add("lm_head.weight", {s.vocab, h}, 0, 0.2f);
  for (int64_t l = 0; l < s.layers; ++l) {
    add(L(l) + "input_layernorm.weight", {h}, 1, 0.1f);
    add(L(l) + "post_attention_layernorm.weight", {h}, 1, 0.1f);
    add(L(l) + "self_attn.q_proj.weight", {qd, h}, 0, 0.3f);
    add(L(l) + "self_attn.k_proj.weight", {kvd, h}, 0, 0.3f);
    add(L(l) + "self_attn.v_proj.weight", {kvd, h}, 0, 0.3f);
    add(L(l) + "self_attn.o_proj.weight", {h, qd}, 0, 0.3f);
    if (HasQkvBias(s)) {
      add(L(l) + "self_attn.q_proj.bias", {qd}, 0, 0.3f);
      add(L(l) + "self_attn.k_proj.bias", {kvd}, 0, 0.3f);
      add(L(l) + "self_attn.v_proj.bias", {kvd}, 0, 0.3f);
    }
    if (HasOBias(s)) add(L(l) + "self_attn.o_proj.bias", {h}, 0, 0.3f);
    if (HasQkNorm(s)) {
      add(L(l) + "self_attn.q_norm.weight", {s.head_dim}, 1, 0.2f);
      add(L(l) + "self_attn.k_norm.weight", {s.head_dim}, 1, 0.2f);
    }
    if (LayerIsMoe(s, l)) {
      const std::string moe = L(l) + (IsMixtral(s) ? "block_sparse_moe." : "mlp.");
      add(moe + "gate.weight", {s.experts, h}, 0, 0.5f);
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string p = moe + fmt::format("experts.{}.", e);
        add(p + (IsMixtral(s) ? "w1.weight" : "gate_proj.weight"), {s.moe_ffn, h}, 0, 0.3f);
        add(p + (IsMixtral(s) ? "w3.weight" : "up_proj.weight"), {s.moe_ffn, h}, 0, 0.3f);
        add(p + (IsMixtral(s) ? "w2.weight" : "down_proj.weight"), {h, s.moe_ffn}, 0, 0.3f);
      }
    } else {
      add(L(l) + "mlp.gate_proj.weight", {s.ffn, h}, 0, 0.3f);
      add(L(l) + "mlp.up_proj.weight", {s.ffn, h}, 0, 0.3f);
      add(L(l) + "mlp.down_proj.weight", {h, s.ffn}, 0, 0.3f);
    }
  }
  WriteFile(dir + "/config.json", ConfigJson(s));
  SafetensorsWriter writer(dir + "/model.safetensors");
  for (const auto& [name, shape] : decl) writer.Declare(name, s.dtype, shape);
  for (const auto& [name, shape] : decl) {
    const std::vector<float>& v = t[name];
    if (s.dtype == DType::F32) {
      writer.Write(v.data(), v.size() * 4);
    } else {
      std::vector<uint16_t> half(v.size());
      if (s.dtype == DType::BF16) {
        F32ToBf16(v.data(), half.data(), v.size());
      } else {
        F32ToF16(v.data(), half.data(), v.size());
      }
      writer.Write(half.data(), half.size() * 2);
    }
  }
  writer.Finish();
  return t;
}

HandRope HandRopeFrequencies(const SynthSpec& s) {
  // Written from the formulas in Hugging Face's modeling_rope_utils.py, in double precision.
  HandRope r;
  const int64_t d = s.head_dim;
  const double base = s.rope_theta;
  for (int64_t i = 0; i < d; i += 2) r.inv_freq.push_back(1.0 / std::pow(base, double(i) / d));
  const std::string& rs = s.rope_scaling;
  auto num = [&](const std::string& key, double dflt) {
    const size_t p = rs.find("\"" + key + "\"");
    if (p == std::string::npos) return dflt;
    return std::stod(rs.substr(rs.find(':', p) + 1));
  };
  if (rs.find("\"linear\"") != std::string::npos) {
    for (double& f : r.inv_freq) f /= num("factor", 1);
  } else if (rs.find("\"llama3\"") != std::string::npos) {
    const double factor = num("factor", 8), lo = num("low_freq_factor", 1),
                 hi = num("high_freq_factor", 4), old = num("original_max_position_embeddings", 0);
    for (double& f : r.inv_freq) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen < old / hi) continue;  // high frequency: unchanged
      if (wavelen > old / lo) {
        f /= factor;  // low frequency: interpolated fully
      } else {
        const double smooth = (old / wavelen - lo) / (hi - lo);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  } else if (rs.find("\"yarn\"") != std::string::npos) {
    const double factor = num("factor", 1);
    const double orig = num("original_max_position_embeddings", double(s.max_position_embeddings));
    const double beta_fast = num("beta_fast", 32), beta_slow = num("beta_slow", 1);
    auto dim_for = [&](double rot) {
      return d * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(base));
    };
    const double lo = std::max(std::floor(dim_for(beta_fast)), 0.0);
    double hi = std::min(std::ceil(dim_for(beta_slow)), double(d - 1));
    if (lo == hi) hi += 0.001;
    for (size_t i = 0; i < r.inv_freq.size(); ++i) {
      const double ramp = std::clamp((double(i) - lo) / (hi - lo), 0.0, 1.0);
      const double extrapolation = r.inv_freq[i], interpolation = r.inv_freq[i] / factor;
      r.inv_freq[i] = interpolation * ramp + extrapolation * (1 - ramp);
    }
    r.attention_factor = num("attention_factor", factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1);
  }
  return r;
}

namespace {

using Vec = std::vector<double>;

// y[out] = W[out, in] x + b
Vec Mat(const TensorMap& w, const std::string& name, const Vec& x, bool bias = false) {
  const std::vector<float>& m = w.at(name + ".weight");
  const size_t in = x.size(), out = m.size() / in;
  Vec y(out, 0.0);
  for (size_t o = 0; o < out; ++o) {
    for (size_t k = 0; k < in; ++k) y[o] += double(m[o * in + k]) * x[k];
    if (bias) y[o] += w.at(name + ".bias")[o];
  }
  return y;
}

Vec RmsNorm(const Vec& x, const std::vector<float>& g, size_t off = 0, size_t n = 0) {
  if (n == 0) n = x.size();
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + 1e-6);
  Vec y(x);
  for (size_t i = 0; i < n; ++i) y[off + i] = x[off + i] * inv * g[i];
  return y;
}

double Silu(double x) { return x / (1 + std::exp(-x)); }

Vec Mlp(const TensorMap& w, const std::string& gate, const std::string& up, const std::string& down,
        const Vec& x) {
  Vec g = Mat(w, gate, x), u = Mat(w, up, x);
  for (size_t i = 0; i < g.size(); ++i) g[i] = Silu(g[i]) * u[i];
  return Mat(w, down, g);
}

}  // namespace

std::vector<double> NaiveForward(const SynthSpec& s, const TensorMap& w,
                                 const std::vector<int32_t>& tokens) {
  const size_t T = tokens.size(), H = size_t(s.hidden), D = size_t(s.head_dim);
  const size_t nh = size_t(s.heads), nkv = size_t(s.kv_heads);
  const HandRope rope = HandRopeFrequencies(s);
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) {
    const float* e = w.at("model.embed_tokens.weight").data() + size_t(tokens[t]) * H;
    x[t].assign(e, e + H);
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const Vec h = RmsNorm(x[t], w.at(L(l) + "input_layernorm.weight"));
      q[t] = Mat(w, L(l) + "self_attn.q_proj", h, HasQkvBias(s));
      k[t] = Mat(w, L(l) + "self_attn.k_proj", h, HasQkvBias(s));
      v[t] = Mat(w, L(l) + "self_attn.v_proj", h, HasQkvBias(s));
      if (HasQkNorm(s)) {
        for (size_t hh = 0; hh < nh; ++hh)
          q[t] = RmsNorm(q[t], w.at(L(l) + "self_attn.q_norm.weight"), hh * D, D);
        for (size_t hh = 0; hh < nkv; ++hh)
          k[t] = RmsNorm(k[t], w.at(L(l) + "self_attn.k_norm.weight"), hh * D, D);
      }
      for (Vec* vec : {&q[t], &k[t]}) {  // rotate_half: pairs (i, i + D/2)
        for (size_t hh = 0; hh < vec->size() / D; ++hh) {
          for (size_t i = 0; i < D / 2; ++i) {
            const double a = double(t) * rope.inv_freq[i];
            const double c = std::cos(a) * rope.attention_factor;
            const double sn = std::sin(a) * rope.attention_factor;
            double& x1 = (*vec)[hh * D + i];
            double& x2 = (*vec)[hh * D + i + D / 2];
            const double y1 = x1 * c - x2 * sn, y2 = x2 * c + x1 * sn;
            x1 = y1;
            x2 = y2;
          }
        }
      }
    }
    const int64_t window = LayerWindow(s, l);
    for (size_t t = 0; t < T; ++t) {
      Vec att(nh * D, 0.0);
      for (size_t hh = 0; hh < nh; ++hh) {
        const size_t kvh = hh / (nh / nkv);
        std::vector<double> sc(t + 1, -INFINITY);
        for (size_t j = 0; j <= t; ++j) {
          if (window > 0 && int64_t(t - j) >= window) continue;  // outside the window
          double dot = 0;
          for (size_t i = 0; i < D; ++i) dot += q[t][hh * D + i] * k[j][kvh * D + i];
          sc[j] = dot / std::sqrt(double(D));
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= t; ++j)
          for (size_t i = 0; i < D; ++i) att[hh * D + i] += sc[j] / sum * v[j][kvh * D + i];
      }
      const Vec o = Mat(w, L(l) + "self_attn.o_proj", att, HasOBias(s));
      for (size_t i = 0; i < H; ++i) x[t][i] += o[i];
    }
    for (size_t t = 0; t < T; ++t) {
      const Vec h = RmsNorm(x[t], w.at(L(l) + "post_attention_layernorm.weight"));
      Vec out(H, 0.0);
      if (LayerIsMoe(s, l)) {
        const std::string moe = L(l) + (IsMixtral(s) ? "block_sparse_moe." : "mlp.");
        const Vec logit = Mat(w, moe + "gate", h);
        std::vector<size_t> order(logit.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return logit[a] > logit[b]; });
        order.resize(size_t(s.top_k));
        std::vector<double> weight;
        if (IsMixtral(s)) {  // softmax over the top-k logits
          double sum = 0;
          for (size_t e : order) sum += std::exp(logit[e] - logit[order[0]]);
          for (size_t e : order) weight.push_back(std::exp(logit[e] - logit[order[0]]) / sum);
        } else {  // softmax over all experts, then (optionally) renormalise the top-k
          double all = 0, top = 0;
          for (double z : logit) all += std::exp(z - logit[order[0]]);
          for (size_t e : order) weight.push_back(std::exp(logit[e] - logit[order[0]]) / all);
          for (double p : weight) top += p;
          if (s.norm_topk_prob)
            for (double& p : weight) p /= top;
        }
        for (size_t j = 0; j < order.size(); ++j) {
          const std::string p = moe + fmt::format("experts.{}.", order[j]);
          const Vec y = IsMixtral(s) ? Mlp(w, p + "w1", p + "w3", p + "w2", h)
                                     : Mlp(w, p + "gate_proj", p + "up_proj", p + "down_proj", h);
          for (size_t i = 0; i < H; ++i) out[i] += weight[j] * y[i];
        }
      } else {
        out = Mlp(w, L(l) + "mlp.gate_proj", L(l) + "mlp.up_proj", L(l) + "mlp.down_proj", h);
      }
      for (size_t i = 0; i < H; ++i) x[t][i] += out[i];
    }
  }
  std::vector<double> logits;
  const std::string head = s.tie ? "model.embed_tokens" : "lm_head";
  for (size_t t = 0; t < T; ++t) {
    const Vec y = Mat(w, head, RmsNorm(x[t], w.at("model.norm.weight")));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

}  // namespace tq::test
