// Fast CPU paths of the recurrent ops: threads over heads, contiguous inner loops over the value
// (DeltaNet) or state (SSD) axis that the compiler vectorises, and for prefill the chunked forms:
// within a chunk of L tokens the state's contribution is one [L, dk] x [dk, dv] product and the
// intra-chunk interactions an L x L triangle, so the state is read and written once per chunk
// instead of once per token.
//
// Chunked Gated DeltaNet. With γ_i = Σ_{j<=i} g_j inside the chunk and S0 the incoming state,
// unrolling the recurrence gives
//   δ_i = β_i (v_i − e^{γ_i} S0ᵀk_i) − Σ_{j<i} β_i e^{γ_i−γ_j} (k_i·k_j) δ_j   (forward solve)
//   o_i = e^{γ_i} S0ᵀq_i + Σ_{j<=i} e^{γ_i−γ_j} (q_i·k_j) δ_j
//   S_L = e^{γ_L} S0 + Σ_j e^{γ_L−γ_j} k_j δ_jᵀ
// Chunked SSD is the same without the solve: h_i = e^{γ_i} h0 + Σ_{j<=i} e^{γ_i−γ_j} dt_j x_j B_jᵀ
// (γ from dt·A), y_i = h_i C_i + D x_i.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/recurrent_ops.h"

namespace tq::kernels::cpu {

// The per-head loops are compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time
// (GCC function multi-versioning); other targets build them once.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TQ_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TQ_HOT
#endif

namespace {

inline float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// dst[0..m) += a * src[0..m)
inline void Axpy(float a, const float* __restrict src, float* __restrict dst, int64_t m) {
  for (int64_t i = 0; i < m; ++i) dst[i] += a * src[i];
}
// Eight partial sums so the compiler can vectorise the reduction without -ffast-math.
inline float Dot(const float* __restrict a, const float* __restrict b, int64_t m) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < m; ++i) s += a[i] * b[i];
  return s;
}

// Per-thread scratch, grown once and reused (no allocation per token once warm).
std::vector<float>& Scratch(int slot) {
  thread_local std::vector<float> bufs[8];
  return bufs[slot];
}
float* Need(int slot, int64_t n) {
  auto& b = Scratch(slot);
  if (int64_t(b.size()) < n) b.resize(size_t(n));
  return b.data();
}

}  // namespace

void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                  float* state, const Conv1dParams& p, float* y) {
  const int64_t C = p.channels, K = p.kernel;
  TQ_CHECK(C > 0 && K >= 1 && x_stride >= C, "conv1d", "bad shape C={} K={} stride={}", C, K,
           x_stride);
  // Weights as [K, C] so that every tap is a contiguous channel vector.
  float* wt = Need(0, K * C);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) wt[j * C + c] = w[c * K + j];
  auto row = [&](int64_t r) -> const float* {  // xpad row r
    return r < K - 1 ? state + r * C : x + (r - (K - 1)) * x_stride;
  };
  for (int64_t t = 0; t < n; ++t) {
    float* yt = y + t * C;
    if (bias) {
      std::copy(bias, bias + C, yt);
    } else {
      std::fill(yt, yt + C, 0.0f);
    }
    for (int64_t j = 0; j < K; ++j) {
      const float* __restrict xr = row(t + j);
      const float* __restrict wj = wt + j * C;
      for (int64_t c = 0; c < C; ++c) yt[c] += wj[c] * xr[c];
    }
    if (p.silu)
      for (int64_t c = 0; c < C; ++c) yt[c] = Silu(yt[c]);
  }
  // New state: the last K-1 rows of xpad (may overlap the old state when n < K-1).
  float* next = Need(1, (K - 1) * C);
  for (int64_t r = 0; r < K - 1; ++r) std::copy(row(n + r), row(n + r) + C, next + r * C);
  std::copy(next, next + (K - 1) * C, state);
}

namespace {

// One value head of Gated DeltaNet over n tokens (q, k already normalised and scaled into
// qn / kn [n, dk]).
TQ_HOT void DeltaNetHead(const float* qn, const float* kn, const float* v, int64_t v_stride,
                         const float* g, const float* beta, int64_t gb_stride, int64_t n,
                         int64_t dk, int64_t dv, int64_t chunk, float* S, float* out,
                         int64_t out_stride) {
  if (n == 1) {  // recurrent form: two passes over S
    const float decay = std::exp(g[0]);
    float* kv = Need(2, dv);
    std::fill(kv, kv + dv, 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* Si = S + i * dv;
      for (int64_t j = 0; j < dv; ++j) Si[j] *= decay;
      Axpy(kn[i], Si, kv, dv);
    }
    for (int64_t j = 0; j < dv; ++j) kv[j] = beta[0] * (v[j] - kv[j]);  // δ
    std::fill(out, out + dv, 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* Si = S + i * dv;
      Axpy(kn[i], kv, Si, dv);
      Axpy(qn[i], Si, out, dv);
    }
    return;
  }
  float* gam = Need(3, chunk);
  float* delta = Need(4, chunk * dv);  // [L, dv]
  float* qs0 = Need(5, chunk * dv);    // [L, dv] S0ᵀ q_i
  float* kk = Need(6, chunk * chunk);  // [L, L] (lower triangle)
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t L = std::min(chunk, n - c0);
    const float* qc = qn + c0 * dk;
    const float* kc = kn + c0 * dk;
    float acc = 0;
    for (int64_t i = 0; i < L; ++i) gam[i] = (acc += g[(c0 + i) * gb_stride]);
    // S0ᵀk_i -> delta rows, S0ᵀq_i -> qs0 rows.
    std::fill(delta, delta + L * dv, 0.0f);
    std::fill(qs0, qs0 + L * dv, 0.0f);
    for (int64_t r = 0; r < dk; ++r) {
      const float* Sr = S + r * dv;
      for (int64_t i = 0; i < L; ++i) {
        Axpy(kc[i * dk + r], Sr, delta + i * dv, dv);
        Axpy(qc[i * dk + r], Sr, qs0 + i * dv, dv);
      }
    }
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j) kk[i * L + j] = Dot(kc + i * dk, kc + j * dk, dk);
    // Forward solve for δ.
    for (int64_t i = 0; i < L; ++i) {
      const float b = beta[(c0 + i) * gb_stride], e = std::exp(gam[i]);
      const float* vi = v + (c0 + i) * v_stride;
      float* di = delta + i * dv;
      for (int64_t j = 0; j < dv; ++j) di[j] = b * (vi[j] - e * di[j]);
      for (int64_t j = 0; j < i; ++j)
        Axpy(-b * std::exp(gam[i] - gam[j]) * kk[i * L + j], delta + j * dv, di, dv);
    }
    // Outputs.
    for (int64_t i = 0; i < L; ++i) {
      float* oi = out + (c0 + i) * out_stride;
      const float e = std::exp(gam[i]);
      for (int64_t j = 0; j < dv; ++j) oi[j] = e * qs0[i * dv + j];
      for (int64_t j = 0; j <= i; ++j)
        Axpy(std::exp(gam[i] - gam[j]) * Dot(qc + i * dk, kc + j * dk, dk), delta + j * dv, oi, dv);
    }
    // State to the chunk's end.
    const float eL = std::exp(gam[L - 1]);
    for (int64_t r = 0; r < dk; ++r) {
      float* Sr = S + r * dv;
      for (int64_t j = 0; j < dv; ++j) Sr[j] *= eL;
      for (int64_t i = 0; i < L; ++i)
        Axpy(std::exp(gam[L - 1] - gam[i]) * kc[i * dk + r], delta + i * dv, Sr, dv);
    }
  }
}

}  // namespace

void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t n, float* state, const DeltaNetParams& p,
                   float* out) {
  const int64_t Hk = p.num_k_heads, Hv = p.num_v_heads, dk = p.k_dim, dv = p.v_dim;
  TQ_CHECK(Hk > 0 && Hv % Hk == 0 && dk > 0 && dv > 0 && p.chunk > 0, "deltanet",
           "bad heads Hk={} Hv={} dk={} dv={} chunk={}", Hk, Hv, dk, dv, p.chunk);
  if (n <= 0) return;
  ThreadPool::Global().ParallelFor(Hv, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t hk = h / (Hv / Hk);
      float* qn = Need(7, 2 * n * dk);  // [n, dk] q then k, normalised
      float* kn = qn + n * dk;
      for (int64_t t = 0; t < n; ++t) {
        const float* qt = q + t * p.q_stride + hk * dk;
        const float* kt = k + t * p.k_stride + hk * dk;
        const float qi = p.qk_l2norm ? 1.0f / std::sqrt(Dot(qt, qt, dk) + p.l2_eps) : 1.0f;
        const float ki = p.qk_l2norm ? 1.0f / std::sqrt(Dot(kt, kt, dk) + p.l2_eps) : 1.0f;
        for (int64_t i = 0; i < dk; ++i) {
          qn[t * dk + i] = qt[i] * qi * p.scale;
          kn[t * dk + i] = kt[i] * ki;
        }
      }
      DeltaNetHead(qn, kn, v + h * dv, p.v_stride, g + h, beta + h, Hv, n, dk, dv, p.chunk,
                   state + h * dk * dv, out + h * dv, Hv * dv);
    }
  });
}

namespace {

// One head of the SSD scan over n tokens (state S [P, N]).
TQ_HOT void SsdHead(const float* x, const float* B, const float* C, const float* dt, const float* A,
                    const float* D, int64_t n, float* state, const SsdParams& p, float* y,
                    int64_t h) {
  const int64_t H = p.num_heads, P = p.head_dim, N = p.state_size, G = p.n_groups;
  const int64_t grp = h / (H / G);
  float* S = state + h * P * N;  // [P, N]
  const float dskip = D ? D[h] : 0.0f;
  if (n == 1) {
    const float d = dt[h], a = std::exp(d * A[h]);
    const float* xt = x + h * P;
    const float* bt = B + grp * N;
    const float* ct = C + grp * N;
    for (int64_t i = 0; i < P; ++i) {
      float* Si = S + i * N;
      const float dx = d * xt[i];
      for (int64_t s = 0; s < N; ++s) Si[s] = a * Si[s] + dx * bt[s];
      y[h * P + i] = Dot(Si, ct, N) + dskip * xt[i];
    }
    return;
  }
  const int64_t chunk = p.chunk;
  float* gam = Need(0, chunk);
  float* cb = Need(1, chunk * chunk);  // [L, L] C_i · B_j
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t L = std::min(chunk, n - c0);
    float acc = 0;
    for (int64_t i = 0; i < L; ++i) gam[i] = (acc += dt[(c0 + i) * H + h] * A[h]);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j)
        cb[i * L + j] =
            Dot(C + (c0 + i) * p.bc_stride + grp * N, B + (c0 + j) * p.bc_stride + grp * N, N);
    for (int64_t i = 0; i < L; ++i) {
      const float* ci = C + (c0 + i) * p.bc_stride + grp * N;
      const float* xi = x + (c0 + i) * p.x_stride + h * P;
      float* yi = y + ((c0 + i) * H + h) * P;
      const float e = std::exp(gam[i]);
      for (int64_t r = 0; r < P; ++r) yi[r] = e * Dot(S + r * N, ci, N) + dskip * xi[r];
      for (int64_t j = 0; j <= i; ++j) {
        const float wgt = std::exp(gam[i] - gam[j]) * dt[(c0 + j) * H + h] * cb[i * L + j];
        Axpy(wgt, x + (c0 + j) * p.x_stride + h * P, yi, P);
      }
    }
    const float eL = std::exp(gam[L - 1]);
    for (int64_t r = 0; r < P; ++r) {
      float* Sr = S + r * N;
      for (int64_t s = 0; s < N; ++s) Sr[s] *= eL;
      for (int64_t j = 0; j < L; ++j) {
        const float wgt = std::exp(gam[L - 1] - gam[j]) * dt[(c0 + j) * H + h] *
                          x[(c0 + j) * p.x_stride + h * P + r];
        Axpy(wgt, B + (c0 + j) * p.bc_stride + grp * N, Sr, N);
      }
    }
  }
}

}  // namespace

void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
         const float* D, int64_t n, float* state, const SsdParams& p, float* y) {
  const int64_t H = p.num_heads, P = p.head_dim, N = p.state_size, G = p.n_groups;
  TQ_CHECK(H > 0 && G > 0 && H % G == 0 && P > 0 && N > 0 && p.chunk > 0, "ssd",
           "bad shape H={} P={} N={} G={} chunk={}", H, P, N, G, p.chunk);
  if (n <= 0) return;
  ThreadPool::Global().ParallelFor(H, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) SsdHead(x, B, C, dt, A, D, n, state, p, y, h);
  });
}

}  // namespace tq::kernels::cpu
