// The ops of the newer families on the GPU (backend.h FamilyOp): the activations and gates of
// gemma / gpt_oss / qwen2_moe / nemotron_h, partial RoPE and gated RMSNorm, attention with
// soft-capped scores and sink logits (gemma2, gpt_oss), and the recurrent mixers' causal conv1d,
// Gated DeltaNet and Mamba-2 scan (qwen3_next, qwen3_5, nemotron_h). Contracts and the scalar
// references: activation_ops.h, attention_variant_ops.h, recurrent_ops.h, host_backend*.cc.
// fp32 arithmetic throughout (the references accumulate in double: the conformance bounds say
// how close). These run where the model needs them, a few per layer; written for correctness
// and parallelism over channels / heads, not tuned.
#include <cfloat>

#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
// (a named namespace: the emulator compiles every .cu file as one translation unit)
namespace family {

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }
// torch.nn.functional.softplus (beta 1, threshold 20).
__device__ __forceinline__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// --- elementwise: one thread per element ---

__global__ void ScaleKernel(float* x, int64_t n, float s) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void GeluTanhMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = gate[i], c = 0.7978845608028654f;  // √(2/π)
  out[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * up[i];
}

__global__ void ClampedSwigluKernel(const float* gate, const float* up, int64_t n, float alpha,
                                    float limit, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = fminf(gate[i], limit), u = fminf(fmaxf(up[i], -limit), limit);
  out[i] = g * Sigmoid(alpha * g) * (u + 1.0f);
}

__global__ void SoftcapKernel(float* x, int64_t n, float cap) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

__global__ void SigmoidGateRowsKernel(float* x, const float* g, int64_t rows, int64_t dim) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * dim) x[i] *= Sigmoid(g[i / dim]);
}

// --- MLA's per-head product (HeadMatMul): one warp per output of one (token, head) row ---

constexpr int kHeadRowsPerBlock = kThreads / 32;

// Block (r, b): row r = t·heads + h of x, outputs b·8 .. b·8 + 7 (one a warp); lanes stride `in`
// so a warp reads each weight row coalesced.
__global__ void HeadMatMulKernel(const float* __restrict__ x, const float* __restrict__ w,
                                 DevHeadMatMul p, float* __restrict__ y) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t r = blockIdx.x, h = r % p.heads;
  const int64_t o = int64_t(blockIdx.y) * kHeadRowsPerBlock + (threadIdx.x >> 5);
  if (o >= p.out) return;
  const int lane = threadIdx.x & 31;
  const float* xr = x + r * p.x_stride;
  const float* wr = w + (h * p.out + o) * p.in;
  float acc = 0.0f;
  for (int64_t i = lane; i < p.in; i += 32) acc += wr[i] * xr[i];
  acc = WarpSum(acc);
  if (lane == 0) y[r * p.y_stride + o] = acc;
}

__global__ void Relu2Kernel(const float* x, int64_t n, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float r = fmaxf(x[i], 0.0f);
  out[i] = r * r;
}

// One thread per (token, head).
__global__ void SsmDtKernel(const float* dt, int64_t stride, int64_t n, int64_t heads,
                            const float* bias, float lo, float hi, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * heads) return;
  const int64_t t = i / heads, h = i - t * heads;
  out[i] = fminf(fmaxf(Softplus(dt[t * stride + h] + bias[h]), lo), hi);
}

__global__ void DeltaNetGatesKernel(const float* b, const float* a, int64_t stride, int64_t n,
                                    int64_t heads, const float* a_log, const float* dt_bias,
                                    float* g, float* beta) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * heads) return;
  const int64_t t = i / heads, h = i - t * heads;
  g[i] = -expf(a_log[h]) * Softplus(a[t * stride + h] + dt_bias[h]);
  beta[i] = Sigmoid(b[t * stride + h]);
}

// One thread per (row, pair i < rotary_dim / 2), all heads of the row; cos/sin in double of the
// fp32 angle, as the Rope kernel and the reference.
__global__ void PartialRopeKernel(float* x, int64_t rows, int64_t heads, int64_t head_dim,
                                  int64_t half, const int64_t* positions, const float* inv_freq,
                                  float attn_factor) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half) return;
  const int64_t r = i / half, p = i - r * half;
  const float angle = float(positions[r]) * inv_freq[p];
  const float c = float(cos(double(angle))) * attn_factor;
  const float s = float(sin(double(angle))) * attn_factor;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + (r * heads + h) * head_dim;
    const float a = v[p], b = v[p + half];
    v[p] = a * c - b * s;
    v[p + half] = b * c + a * s;
  }
}

// One block per (row, group of `group` channels).
__global__ void GatedRmsNormKernel(const float* x, int64_t dim, int64_t group, const float* z,
                                   const float* weight, float eps, bool gate_first, float* out) {
  __shared__ float part[32];
  const int64_t base = int64_t(blockIdx.x) * dim + int64_t(blockIdx.y) * group;
  const int64_t g0 = int64_t(blockIdx.y) * group;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) {
    const float u = gate_first ? x[base + i] * Silu(z[base + i]) : x[base + i];
    ss += u * u;
  }
  const float inv = 1.0f / sqrtf(BlockSum(ss, part) / float(group) + eps);
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) {
    const float zi = z[base + i];
    const float u = gate_first ? x[base + i] * Silu(zi) : x[base + i];
    const float v = u * inv * weight[g0 + i];
    out[base + i] = gate_first ? v : v * Silu(zi);
  }
}

// --- attention with soft-capped scores and sinks: one block of kVarWarps warps per (query row,
// head); warp w takes positions first + w, first + w + kVarWarps, ... with an online softmax
// (lane l holds output channels l, l + 32, ...), then the warps merge through shared memory with
// the sink logit as one more denominator term. ---
constexpr int kVarWarps = 4;
constexpr int kVarPerLane = int(kMaxHeadDim / 32);

__global__ void __launch_bounds__(kVarWarps * 32)
    AttentionVariantKernel(const float* q, int64_t pos0, const void* k, const void* v, Elem elem,
                           int64_t head_stride, DevSinkAttention p, float* out) {
  GridLaunchDependents();  // the next product may start its set-up (TQ_LAUNCH_PDL)
  __shared__ float qs[kMaxHeadDim];
  __shared__ float wm[kVarWarps], wl[kVarWarps];
  __shared__ float wacc[kVarWarps][kMaxHeadDim];
  const int64_t r = blockIdx.x, h = blockIdx.y, d = p.head_dim;
  const int64_t hk = h / (p.num_heads / p.num_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) qs[i] = q[(r * p.num_heads + h) * d + i];
  __syncthreads();
  const int64_t pos = pos0 + r;
  const int64_t first = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
  float m = -FLT_MAX, l = 0.0f, acc[kVarPerLane];
#pragma unroll
  for (int j = 0; j < kVarPerLane; ++j) acc[j] = 0.0f;
  const int64_t kbase = hk * head_stride;
  for (int64_t t = first + warp; t <= pos; t += kVarWarps) {
    float dot = 0.0f;
    for (int64_t i = lane; i < d; i += 32) dot += qs[i] * LoadElem(k, elem, kbase + t * d + i);
    dot = WarpSum(dot) * p.scale;
    if (p.softcap > 0.0f) dot = p.softcap * tanhf(dot / p.softcap);
    const float mn = fmaxf(m, dot), c = expf(m - mn), e = expf(dot - mn);
    l = l * c + e;
#pragma unroll
    for (int j = 0; j < kVarPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < d) acc[j] = acc[j] * c + e * LoadElem(v, elem, kbase + t * d + i);
    }
    m = mn;
  }
  if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
  for (int j = 0; j < kVarPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    if (i < d) wacc[warp][i] = acc[j];
  }
  __syncthreads();
  float mx = p.sinks ? p.sinks[h] : -FLT_MAX;
  for (int w = 0; w < kVarWarps; ++w) mx = fmaxf(mx, wm[w]);
  float den = p.sinks ? expf(p.sinks[h] - mx) : 0.0f;
  float f[kVarWarps];
  for (int w = 0; w < kVarWarps; ++w) {
    f[w] = wl[w] > 0.0f ? expf(wm[w] - mx) : 0.0f;  // a warp with no position adds nothing
    den += wl[w] * f[w];
  }
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kVarWarps; ++w) o += wacc[w][i] * f[w];
    out[(r * p.num_heads + h) * d + i] = o / den;
  }
}

// --- recurrent mixers ---

// One thread per channel; the last K-1 rows of the padded input ride in registers, so y may
// alias x.
__global__ void CausalConv1dKernel(const float* x, int64_t n, int64_t x_stride, const float* w,
                                   const float* bias, float* state, int64_t C, int64_t K, bool silu,
                                   float* y) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float win[kMaxConvKernel], wc[kMaxConvKernel];
  for (int64_t j = 0; j < K; ++j) wc[j] = w[c * K + j];
  for (int64_t j = 0; j + 1 < K; ++j) win[j] = state[j * C + c];
  const float b = bias ? bias[c] : 0.0f;
  for (int64_t t = 0; t < n; ++t) {
    win[K - 1] = x[t * x_stride + c];
    float acc = b;
    for (int64_t j = 0; j < K; ++j) acc += wc[j] * win[j];
    y[t * C + c] = silu ? Silu(acc) : acc;
    for (int64_t j = 0; j + 1 < K; ++j) win[j] = win[j + 1];
  }
  for (int64_t j = 0; j + 1 < K; ++j) state[j * C + c] = win[j];
}

// One block per value head; thread j owns column j of the head's state S [dk, dv] (threads loop
// when dv > blockDim). Per token: q, k l2-normalised into shared memory, then per column
// δ_j = β (v_j − exp(g) Σ_i S_ij k_i), S_ij <- exp(g) S_ij + k_i δ_j, o_j = Σ_i S_ij q_i.
__global__ void GatedDeltaNetKernel(const float* q, const float* k, const float* v, const float* g,
                                    const float* beta, int64_t n, float* state, DevDeltaNet p,
                                    float* out) {
  float* qn = DynamicShared();  // [dk], then kn [dk]
  float* kn = qn + p.k_dim;
  __shared__ float part[32];
  const int64_t Hv = p.num_v_heads, dk = p.k_dim, dv = p.v_dim;
  const int64_t h = blockIdx.x, hk = h / (Hv / p.num_k_heads);
  float* S = state + h * dk * dv;
  for (int64_t t = 0; t < n; ++t) {
    const float* qt = q + t * p.q_stride + hk * dk;
    const float* kt = k + t * p.k_stride + hk * dk;
    float qs = 0.0f, ks = 0.0f;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
      qs += qt[i] * qt[i];
      ks += kt[i] * kt[i];
    }
    const float qsum = BlockSum(qs, part), ksum = BlockSum(ks, part);
    const float qi = p.qk_l2norm ? 1.0f / sqrtf(qsum + p.l2_eps) : 1.0f;
    const float ki = p.qk_l2norm ? 1.0f / sqrtf(ksum + p.l2_eps) : 1.0f;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
      qn[i] = qt[i] * qi * p.scale;
      kn[i] = kt[i] * ki;
    }
    __syncthreads();
    const float decay = expf(g[t * Hv + h]), b = beta[t * Hv + h];
    const float* vt = v + t * p.v_stride + h * dv;
    for (int64_t j = threadIdx.x; j < dv; j += blockDim.x) {
      float sk = 0.0f;
      for (int64_t i = 0; i < dk; ++i) sk += S[i * dv + j] * kn[i];
      const float delta = b * (vt[j] - decay * sk);
      float o = 0.0f;
      for (int64_t i = 0; i < dk; ++i) {
        const float s = decay * S[i * dv + j] + kn[i] * delta;
        S[i * dv + j] = s;
        o += s * qn[i];
      }
      out[(t * Hv + h) * dv + j] = o;
    }
    __syncthreads();  // qn / kn are rewritten for the next token
  }
}

// One block per head; thread i owns row i of the head's state [P, N] (threads loop when P >
// blockDim). B and C of the head's group are read by every thread (broadcast loads).
__global__ void SsdKernel(const float* x, const float* B, const float* C, const float* dt,
                          const float* A, const float* D, int64_t n, float* state, DevSsd p,
                          float* y) {
  const int64_t H = p.num_heads, P = p.head_dim, N = p.state_size;
  const int64_t h = blockIdx.x, grp = h / (H / p.n_groups);
  float* S = state + h * P * N;
  for (int64_t t = 0; t < n; ++t) {
    const float d = dt[t * H + h], a = expf(d * A[h]);
    const float* bt = B + t * p.bc_stride + grp * N;
    const float* ct = C + t * p.bc_stride + grp * N;
    for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
      const float xi = x[t * p.x_stride + h * P + i];
      float acc = 0.0f;
      for (int64_t s = 0; s < N; ++s) {
        const float val = a * S[i * N + s] + d * xi * bt[s];
        S[i * N + s] = val;
        acc += val * ct[s];
      }
      y[(t * H + h) * P + i] = acc + (D ? D[h] * xi : 0.0f);
    }
  }
}

}  // namespace family

void LaunchScale(float* x, int64_t n, float s, cudaStream_t st) {
  TQ_LAUNCH(family::ScaleKernel, Blocks(n, family::kThreads), family::kThreads, st, x, n, s);
}
void LaunchGeluTanhMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s) {
  TQ_LAUNCH(family::GeluTanhMulKernel, Blocks(n, family::kThreads), family::kThreads, s, gate, up,
            n, out);
}
void LaunchClampedSwiglu(const float* gate, const float* up, int64_t n, float alpha, float limit,
                         float* out, cudaStream_t s) {
  TQ_LAUNCH(family::ClampedSwigluKernel, Blocks(n, family::kThreads), family::kThreads, s, gate, up,
            n, alpha, limit, out);
}
void LaunchSoftcap(float* x, int64_t n, float cap, cudaStream_t s) {
  TQ_LAUNCH(family::SoftcapKernel, Blocks(n, family::kThreads), family::kThreads, s, x, n, cap);
}
void LaunchSigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim, cudaStream_t s) {
  TQ_LAUNCH(family::SigmoidGateRowsKernel, Blocks(rows * dim, family::kThreads), family::kThreads,
            s, x, g, rows, dim);
}
void LaunchHeadMatMul(const float* x, int64_t n, const float* w, const DevHeadMatMul& p, float* y,
                      cudaStream_t s) {
  const dim3 grid(unsigned(n * p.heads),
                  unsigned((p.out + family::kHeadRowsPerBlock - 1) / family::kHeadRowsPerBlock));
  TQ_LAUNCH(family::HeadMatMulKernel, grid, family::kThreads, s, x, w, p, y);
}
void LaunchRelu2(const float* x, int64_t n, float* out, cudaStream_t s) {
  TQ_LAUNCH(family::Relu2Kernel, Blocks(n, family::kThreads), family::kThreads, s, x, n, out);
}
void LaunchSsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads, const float* bias,
                 float lo, float hi, float* out, cudaStream_t s) {
  TQ_LAUNCH(family::SsmDtKernel, Blocks(n * heads, family::kThreads), family::kThreads, s, dt,
            stride, n, heads, bias, lo, hi, out);
}
void LaunchDeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n, int64_t heads,
                         const float* a_log, const float* dt_bias, float* g, float* beta,
                         cudaStream_t s) {
  TQ_LAUNCH(family::DeltaNetGatesKernel, Blocks(n * heads, family::kThreads), family::kThreads, s,
            b, a, stride, n, heads, a_log, dt_bias, g, beta);
}
void LaunchGatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group, const float* z,
                        const float* weight, float eps, bool gate_first, float* out,
                        cudaStream_t s) {
  const dim3 grid(unsigned(rows), unsigned(dim / group));
  TQ_LAUNCH(family::GatedRmsNormKernel, grid, family::kThreads, s, x, dim, group, z, weight, eps,
            gate_first, out);
}
void LaunchPartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                       const int64_t* positions, const float* inv_freq, float attn_factor,
                       cudaStream_t s) {
  const int64_t half = rotary_dim / 2;
  TQ_LAUNCH(family::PartialRopeKernel, Blocks(rows * half, family::kThreads), family::kThreads, s,
            x, rows, heads, head_dim, half, positions, inv_freq, attn_factor);
}
void LaunchAttentionVariant(const float* q, int64_t n, int64_t pos0, const void* k, const void* v,
                            Elem elem, int64_t head_stride, const DevSinkAttention& p, float* out,
                            cudaStream_t s) {
  const dim3 grid(unsigned(n), unsigned(p.num_heads));
  TQ_LAUNCH(family::AttentionVariantKernel, grid, family::kVarWarps * 32, s, q, pos0, k, v, elem,
            head_stride, p, out);
}
void LaunchCausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w,
                        const float* bias, float* state, int64_t channels, int64_t kernel,
                        bool silu, float* y, cudaStream_t s) {
  TQ_LAUNCH(family::CausalConv1dKernel, Blocks(channels, family::kThreads), family::kThreads, s, x,
            n, x_stride, w, bias, state, channels, kernel, silu, y);
}
void LaunchGatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                         const float* beta, int64_t n, float* state, const DevDeltaNet& p,
                         float* out, cudaStream_t s) {
  const int threads = int(p.v_dim >= 256 ? 256 : (p.v_dim + 31) / 32 * 32);
  TQ_LAUNCH_SMEM(family::GatedDeltaNetKernel, unsigned(p.num_v_heads), unsigned(threads),
                 size_t(2 * p.k_dim) * sizeof(float), s, q, k, v, g, beta, n, state, p, out);
}
void LaunchSsd(const float* x, const float* B, const float* C, const float* dt, const float* A,
               const float* D, int64_t n, float* state, const DevSsd& p, float* y, cudaStream_t s) {
  const int threads = int(p.head_dim >= 256 ? 256 : (p.head_dim + 31) / 32 * 32);
  TQ_LAUNCH(family::SsdKernel, unsigned(p.num_heads), unsigned(threads), s, x, B, C, dt, A, D, n,
            state, p, y);
}

}  // namespace tq::kernels::cuda
