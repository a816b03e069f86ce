// Scalar references of the recurrent ops: token by token, exactly the recurrences written in
// recurrent_ops.h, double accumulators for the reductions. The oracle of the cpu paths.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/recurrent_ops.h"

namespace tq::kernels::ref {
namespace {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                  float* state, const Conv1dParams& p, float* y) {
  const int64_t C = p.channels, K = p.kernel;
  TQ_CHECK(C > 0 && K >= 1 && x_stride >= C, "conv1d ref", "bad shape C={} K={} stride={}", C, K,
           x_stride);
  // xpad row r: r < K-1 -> state row r, else x row r - (K-1).
  auto at = [&](int64_t r, int64_t c) -> float {
    return r < K - 1 ? state[r * C + c] : x[(r - (K - 1)) * x_stride + c];
  };
  std::vector<float> out(size_t(n * C));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double acc = bias ? bias[c] : 0.0;
      for (int64_t j = 0; j < K; ++j) acc += double(w[c * K + j]) * at(t + j, c);
      const float v = float(acc);
      out[size_t(t * C + c)] = p.silu ? Silu(v) : v;
    }
  }
  std::vector<float> next(size_t((K - 1) * C));
  for (int64_t r = 0; r < K - 1; ++r)
    for (int64_t c = 0; c < C; ++c) next[size_t(r * C + c)] = at(n + r, c);
  std::copy(next.begin(), next.end(), state);
  std::copy(out.begin(), out.end(), y);
}

void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t n, float* state, const DeltaNetParams& p,
                   float* out) {
  const int64_t Hk = p.num_k_heads, Hv = p.num_v_heads, dk = p.k_dim, dv = p.v_dim;
  TQ_CHECK(Hk > 0 && Hv % Hk == 0 && dk > 0 && dv > 0, "deltanet ref",
           "bad heads Hk={} Hv={} dk={} dv={}", Hk, Hv, dk, dv);
  std::vector<double> qn(static_cast<size_t>(dk)), kn(static_cast<size_t>(dk)),
      kv(static_cast<size_t>(dv));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t hk = h / (Hv / Hk);
      const float* qt = q + t * p.q_stride + hk * dk;
      const float* kt = k + t * p.k_stride + hk * dk;
      const float* vt = v + t * p.v_stride + h * dv;
      double qs = 0, ks = 0;
      for (int64_t i = 0; i < dk; ++i) qs += double(qt[i]) * qt[i], ks += double(kt[i]) * kt[i];
      const double qi = p.qk_l2norm ? 1.0 / std::sqrt(qs + p.l2_eps) : 1.0;
      const double ki = p.qk_l2norm ? 1.0 / std::sqrt(ks + p.l2_eps) : 1.0;
      for (int64_t i = 0; i < dk; ++i)
        qn[size_t(i)] = qt[i] * qi * p.scale, kn[size_t(i)] = kt[i] * ki;
      float* S = state + h * dk * dv;  // [dk, dv]
      const double decay = std::exp(double(g[t * Hv + h])), b = beta[t * Hv + h];
      for (int64_t i = 0; i < dk * dv; ++i) S[i] = float(S[i] * decay);
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < dk; ++i) acc += double(S[i * dv + j]) * kn[size_t(i)];
        kv[size_t(j)] = b * (vt[j] - acc);  // δ
      }
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j)
          S[i * dv + j] = float(S[i * dv + j] + kn[size_t(i)] * kv[size_t(j)]);
      float* ot = out + (t * Hv + h) * dv;
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < dk; ++i) acc += double(S[i * dv + j]) * qn[size_t(i)];
        ot[j] = float(acc);
      }
    }
  }
}

void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
         const float* D, int64_t n, float* state, const SsdParams& p, float* y) {
  const int64_t H = p.num_heads, P = p.head_dim, N = p.state_size, G = p.n_groups;
  TQ_CHECK(H > 0 && G > 0 && H % G == 0 && P > 0 && N > 0, "ssd ref",
           "bad shape H={} P={} N={} G={}", H, P, N, G);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t grp = h / (H / G);
      const float* xt = x + t * p.x_stride + h * P;
      const float* bt = B + t * p.bc_stride + grp * N;
      const float* ct = C + t * p.bc_stride + grp * N;
      const double d = dt[t * H + h], a = std::exp(d * A[h]);
      float* S = state + h * P * N;  // [P, N]
      float* yt = y + (t * H + h) * P;
      for (int64_t i = 0; i < P; ++i) {
        double acc = 0;
        for (int64_t s = 0; s < N; ++s) {
          const double v = a * S[i * N + s] + d * xt[i] * bt[s];
          S[i * N + s] = float(v);
          acc += v * ct[s];
        }
        yt[i] = float(acc + (D ? double(D[h]) * xt[i] : 0.0));
      }
    }
  }
}

}  // namespace tq::kernels::ref
