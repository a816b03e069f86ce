#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tq {

void SigmoidGroupTopK(const float* logits, int64_t n, const GroupTopKRule& r,
                      std::vector<int32_t>& chosen, std::vector<float>& weight) {
  const int64_t E = r.num_experts, G = r.n_group, K = r.top_k;
  TQ_CHECK(E > 0 && G > 0 && E % G == 0 && r.topk_group >= 1 && r.topk_group <= G && K > 0 &&
               K <= E / G * r.topk_group,
           "moe routing", "{} experts in {} groups (keep {}) cannot give top-{}", E, G,
           r.topk_group, K);
  const int64_t per = E / G;
  chosen.resize(size_t(n * K));
  weight.resize(size_t(n * K));
  std::vector<float> s(static_cast<size_t>(E)), t(static_cast<size_t>(E)),
      gs(static_cast<size_t>(G));
  std::vector<int64_t> order(static_cast<size_t>(std::max(E, G)));
  for (int64_t row = 0; row < n; ++row) {
    const float* l = logits + row * E;
    for (int64_t e = 0; e < E; ++e) {
      s[size_t(e)] = 1.0f / (1.0f + std::exp(-l[e]));
      t[size_t(e)] = s[size_t(e)] + (r.correction_bias ? r.correction_bias[e] : 0.0f);
    }
    if (G > 1) {
      for (int64_t g = 0; g < G; ++g) {  // sum of the group's two best selection scores
        float a = -INFINITY, b = -INFINITY;
        for (int64_t e = g * per; e < (g + 1) * per; ++e) {
          const float v = t[size_t(e)];
          if (v > a) {
            b = a;
            a = v;
          } else if (v > b) {
            b = v;
          }
        }
        gs[size_t(g)] = per > 1 ? a + b : a;
      }
      std::iota(order.begin(), order.begin() + G, 0);
      std::stable_sort(order.begin(), order.begin() + G,
                       [&](int64_t x, int64_t y) { return gs[size_t(x)] > gs[size_t(y)]; });
      std::vector<char> keep(size_t(G), 0);
      for (int64_t i = 0; i < r.topk_group; ++i) keep[size_t(order[size_t(i)])] = 1;
      for (int64_t e = 0; e < E; ++e)
        if (!keep[size_t(e / per)]) t[size_t(e)] = 0.0f;  // masked_fill(..., 0.0) as HF does
    }
    std::iota(order.begin(), order.begin() + E, 0);
    std::stable_sort(order.begin(), order.begin() + E,
                     [&](int64_t x, int64_t y) { return t[size_t(x)] > t[size_t(y)]; });
    double sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += s[size_t(order[size_t(j)])];
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = order[size_t(j)];
      chosen[size_t(row * K + j)] = int32_t(e);
      weight[size_t(row * K + j)] =
          r.renormalize ? float(double(s[size_t(e)]) / (sum + 1e-20)) : s[size_t(e)];
    }
  }
}

}  // namespace tq
