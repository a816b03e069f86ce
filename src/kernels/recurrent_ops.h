// Ops of the recurrent mixers (Gated DeltaNet, Mamba-2) and their causal convolution. Each has a
// scalar reference (ref::, the oracle: one obvious loop, double accumulators where it matters)
// and a fast CPU path (cpu::, threaded over heads, chunked for prefill); the conformance tests
// hold them equal. State is fp32 and lives with the sequence (one per recurrent layer), updated
// in place so that a prompt can be fed in any split of chunks and decoded token by token.
#pragma once

#include <cstdint>

namespace tq::kernels {

// Causal depthwise conv1d over time with a rolling state, then optionally SiLU:
//   xpad = [state (K-1 rows) ; x (n rows)]       (time-major, C channels per row)
//   y[t, c] = act(bias[c] + Σ_{j<K} w[c, j] · xpad[t + j, c])
//   state <- the last K-1 rows of xpad
// x rows are x_stride floats apart (a slice of a wider projection); y is [n, C] dense.
struct Conv1dParams {
  int64_t channels = 0;  // C
  int64_t kernel = 4;    // K >= 1
  bool silu = true;
};

// Gated DeltaNet (Yang et al., "Gated Delta Networks"), per value head h with key head
// h / (Hv / Hk) and state S_h [dk, dv]:
//   q, k <- l2-normalised (when qk_l2norm), q ×= scale
//   S <- exp(g_t) · S;   δ = β_t · (v_t − Sᵀ k_t);   S <- S + k_t δᵀ;   o_t = Sᵀ q_t
// q, k: [n, Hk, dk] rows q_stride / k_stride apart; v: [n, Hv, dv] rows v_stride apart;
// g (log decay, <= 0) and beta: [n, Hv]; state: [Hv, dk, dv]; out: [n, Hv, dv] dense.
struct DeltaNetParams {
  int64_t num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;  // floats between consecutive tokens
  float scale = 1.0f;                                // usually 1/sqrt(dk)
  bool qk_l2norm = true;
  float l2_eps = 1e-6f;  // q / sqrt(Σq² + eps)
  int64_t chunk = 64;    // cpu: tokens per chunk of the chunked (prefill) form
};

// Mamba-2's selective scan (SSD), per head h with group h / (H / G) and state h_h [P, N]:
//   a = exp(dt_t · A_h);  h <- a · h + dt_t · x_t B_tᵀ;  y_t = h C_t + D_h · x_t
// x: [n, H, P] rows x_stride apart; B, C: [n, G, N] rows bc_stride apart; dt: [n, H] (already
// softplus'd and clamped); A: [H] (negative); D: [H] or null; state: [H, P, N]; y: [n, H, P].
struct SsdParams {
  int64_t num_heads = 0, head_dim = 0, state_size = 0, n_groups = 1;
  int64_t x_stride = 0, bc_stride = 0;
  int64_t chunk = 64;  // cpu: tokens per chunk
};

namespace ref {
void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                  float* state, const Conv1dParams& p, float* y);
void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t n, float* state, const DeltaNetParams& p, float* out);
void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
         const float* D, int64_t n, float* state, const SsdParams& p, float* y);
}  // namespace ref

namespace cpu {
void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                  float* state, const Conv1dParams& p, float* y);
// n == 1: the recurrent (decode) form; n > 1: the chunked form (intra-chunk triangular solve,
// state carried between chunks).
void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t n, float* state, const DeltaNetParams& p, float* out);
void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
         const float* D, int64_t n, float* state, const SsdParams& p, float* y);
}  // namespace cpu

}  // namespace tq::kernels
