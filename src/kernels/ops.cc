#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string_view>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tq::kernels {
void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias, float* y) {
  if (n <= 0) return;
  cpu::MatMul(x, n, w, bias, y);
}

void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) {
  if (n <= 0 || outs.empty()) return;
  cpu::MatMulGroup(x, n, outs);
}

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
             float* out) {
  cpu::RmsNorm(x, rows, dim, weight, eps, out);
}

void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
          const float* inv_freq, float attn_factor) {
  cpu::Rope(x, rows, heads, head_dim, positions, inv_freq, attn_factor);
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  cpu::SiluMul(gate, up, n, out);
}

void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out) {
  TQ_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.head_dim > 0, "attention",
           "bad head counts {} / {} (head_dim {})", p.num_heads, p.num_kv_heads, p.head_dim);
  if (n <= 0) return;
  cpu::Attention(q, n, pos0, kv, p, out);
}

void Add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int64_t Argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

void TopK(const float* x, int64_t n, int64_t k, int32_t* idx) {
  TQ_CHECK(k >= 0 && k <= n, "topk", "k = {} out of range for n = {}", k, n);
  if (k == 0) return;
  // k is small (experts per token, sampling candidates): a partial insertion sort.
  int64_t have = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (have == k && !(x[i] > x[idx[k - 1]])) continue;
    int64_t j = have < k ? have++ : k - 1;
    while (j > 0 && x[i] > x[idx[j - 1]]) {
      idx[j] = idx[j - 1];
      --j;
    }
    idx[j] = int32_t(i);
  }
}

}  // namespace tq::kernels
