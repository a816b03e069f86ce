// The generic decoder forward pass, written once for every architecture:
//
//   x = embed(tokens)
//   for each layer:
//     h = RMSNorm(x);  q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ  (+ biases: qwen2)
//     q, k = RMSNorm_per_head(q), RMSNorm_per_head(k)   (qwen3)
//     q, k = RoPE(q, pos), RoPE(k, pos)
//     cache ← (k, v);  a = softmax(q·kᵀ·scale, causal [, window]) · v
//     x += a·Woᵀ
//     h = RMSNorm(x);  x += MLP(h)  or  MoE(h)
//   logits = RMSNorm(x)·W_lmᵀ
//
// A batch is a list of rows; consecutive rows form a segment belonging to one sequence (one KV
// cache): a prompt chunk is one segment of n rows, a continuous-batching decode step is one
// segment of 1 row per sequence. Matmuls run over all rows at once, attention per segment.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "model/packed_linear.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {
namespace {

using Buf = ForwardWorkspace;

// x [n, hidden] += down(silu(gate(h)) * up(h)); y: [n, hidden] scratch.
void GatedMlpForward(const GatedMlp& m, const float* h, int64_t n, float* x, Buf& ws, float* y) {
  const int64_t ffn = m.gate->out_features(), hidden = m.down->out_features();
  float* g = Buf::Need(ws.gate, n * ffn);  // [n, ffn]
  float* u = Buf::Need(ws.up, n * ffn);    // [n, ffn]
  const Linear* group[] = {m.gate.get(), m.up.get()};
  float* outs[] = {g, u};
  MatMulShared(group, h, n, outs);
  kernels::SiluMul(g, u, n * ffn, g);
  m.down->MatMul(g, n, y);  // [n, hidden]
  kernels::Add(x, y, n * hidden);
}

// x [n, hidden] += Σ_{e in top-k(router(h))} p_e · expert_e(h). Tokens are grouped by expert so
// each expert runs one matmul over the rows routed to it (gather -> GEMM -> weighted scatter).
// Seam for packed experts: all experts of one projection share an input rotation, so h could be
// rotated once here, before the gather, instead of per expert inside MatMulShared.
void MoeForward(const MoeBlock& moe, const float* h, int64_t n, int64_t hidden, float* x, Buf& ws) {
  const int64_t num_experts = int64_t(moe.experts.size()), top_k = moe.top_k;
  float* probs = Buf::Need(ws.router_probs, n * num_experts);  // [n, experts]
  moe.router->MatMul(h, n, probs);
  ws.chosen.resize(size_t(n * top_k));
  ws.chosen_weight.resize(size_t(n * top_k));
  ws.expert_count.assign(size_t(num_experts), 0);
  for (int64_t r = 0; r < n; ++r) {
    float* p = probs + r * num_experts;
    kernels::Softmax(p, num_experts);  // over all experts, in fp32
    int32_t* sel = ws.chosen.data() + r * top_k;
    float* wt = ws.chosen_weight.data() + r * top_k;
    kernels::TopK(p, num_experts, top_k, sel);
    float sum = 0;
    for (int64_t j = 0; j < top_k; ++j) sum += (wt[j] = p[sel[j]]);
    if (moe.renormalize)
      for (int64_t j = 0; j < top_k; ++j) wt[j] /= sum;
    for (int64_t j = 0; j < top_k; ++j) ++ws.expert_count[size_t(sel[j])];
  }
  // Counting sort of (row, weight) slots by expert.
  ws.expert_begin.assign(size_t(num_experts) + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e)
    ws.expert_begin[size_t(e) + 1] = ws.expert_begin[size_t(e)] + ws.expert_count[size_t(e)];
  ws.slot_row.resize(size_t(n * top_k));
  ws.slot_weight.resize(size_t(n * top_k));
  std::vector<int64_t>& fill = ws.expert_count;  // reused as the fill cursor
  for (int64_t e = 0; e < num_experts; ++e) fill[size_t(e)] = ws.expert_begin[size_t(e)];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = ws.chosen[size_t(r * top_k + j)];
      const int64_t s = fill[size_t(e)]++;
      ws.slot_row[size_t(s)] = r;
      ws.slot_weight[size_t(s)] = ws.chosen_weight[size_t(r * top_k + j)];
    }
  }
  float* xg = Buf::Need(ws.attn, n * hidden);  // [rows of e, hidden] gathered inputs
  float* yg = Buf::Need(ws.y, n * hidden);     // [rows of e, hidden] expert outputs
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t b = ws.expert_begin[size_t(e)], c = ws.expert_begin[size_t(e) + 1] - b;
    if (c == 0) continue;
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(xg + i * hidden, h + ws.slot_row[size_t(b + i)] * hidden,
                  size_t(hidden) * sizeof(float));
    const GatedMlp& m = moe.experts[size_t(e)];
    const int64_t ffn = m.gate->out_features();
    float* g = Buf::Need(ws.gate, c * ffn);
    float* u = Buf::Need(ws.up, c * ffn);
    const Linear* group[] = {m.gate.get(), m.up.get()};
    float* outs[] = {g, u};
    MatMulShared(group, xg, c, outs);
    kernels::SiluMul(g, u, c * ffn, g);
    m.down->MatMul(g, c, yg);
    for (int64_t i = 0; i < c; ++i) {
      float* dst = x + ws.slot_row[size_t(b + i)] * hidden;
      const float wgt = ws.slot_weight[size_t(b + i)];
      const float* src = yg + i * hidden;
      for (int64_t j = 0; j < hidden; ++j) dst[j] += wgt * src[j];
    }
  }
}

}  // namespace

void Model::Run(std::span<const int32_t> tokens, std::span<const Segment> segments,
                std::span<const int64_t> logit_rows, float* logits) {
  const ModelConfig& c = config_;
  const ModelWeights& w = *weights_;
  Buf& ws = *ws_;
  const int64_t n = int64_t(tokens.size()), hidden = c.hidden_size, hd = c.head_dim;
  const int64_t heads = c.num_heads, kv_heads = c.num_kv_heads;
  const int64_t qdim = heads * hd, kvdim = kv_heads * hd;
  const float eps = float(c.rms_norm_eps);

  ws.positions.resize(size_t(n));
  for (const Segment& s : segments)
    for (int64_t i = 0; i < s.count; ++i) ws.positions[size_t(s.begin + i)] = s.cache->size() + i;

  float* x = Buf::Need(ws.x, n * hidden);  // [n, hidden] residual stream
  float* h = Buf::Need(ws.h, n * hidden);  // [n, hidden]
  float* y = Buf::Need(ws.y, n * hidden);  // [n, hidden]
  float* q = Buf::Need(ws.q, n * qdim);    // [n, heads, hd]
  float* k = Buf::Need(ws.k, n * kvdim);   // [n, kv_heads, hd]
  float* v = Buf::Need(ws.v, n * kvdim);   // [n, kv_heads, hd]
  for (int64_t r = 0; r < n; ++r) {
    if (w.embed_packed) {
      w.embed_packed->DequantizeRows(tokens[size_t(r)], 1, x + r * hidden);
    } else {
      ToF32(w.embed, tokens[size_t(r)] * hidden, hidden, x + r * hidden);
    }
  }

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    // --- self-attention ---
    kernels::RmsNorm(x, n, hidden, L.attn_norm.data(), eps, h);
    const Linear* qkv[] = {L.q.get(), L.k.get(), L.v.get()};
    float* qkv_out[] = {q, k, v};
    MatMulShared(qkv, h, n, qkv_out);
    if (!L.q_norm.empty()) {
      kernels::RmsNorm(q, n * heads, hd, L.q_norm.data(), eps, q);
      kernels::RmsNorm(k, n * kv_heads, hd, L.k_norm.data(), eps, k);
    }
    const float* inv_freq = w.rope.inv_freq.data();
    kernels::Rope(q, n, heads, hd, ws.positions.data(), inv_freq, w.rope.attention_factor);
    kernels::Rope(k, n, kv_heads, hd, ws.positions.data(), inv_freq, w.rope.attention_factor);
    float* attn = Buf::Need(ws.attn, n * qdim);  // [n, heads, hd]
    for (const Segment& s : segments) {
      s.cache->Append(l, k + s.begin * kvdim, v + s.begin * kvdim, s.count);
      s.cache->Attend(l, q + s.begin * qdim, s.count, attn + s.begin * qdim);
    }
    L.o->MatMul(attn, n, y);  // [n, hidden]
    kernels::Add(x, y, n * hidden);
    // --- feed-forward ---
    kernels::RmsNorm(x, n, hidden, L.ffn_norm.data(), eps, h);
    if (L.moe) {
      MoeForward(*L.moe, h, n, hidden, x, ws);
    } else {
      GatedMlpForward(*L.mlp, h, n, x, ws, y);
    }
  }

  // Logits only for the rows asked for.
  const int64_t m = int64_t(logit_rows.size());
  if (m > 0) {
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(h + i * hidden, x + logit_rows[size_t(i)] * hidden,
                  size_t(hidden) * sizeof(float));
    kernels::RmsNorm(h, m, hidden, w.final_norm.data(), eps, h);
    w.lm_head->MatMul(h, m, logits);  // [m, vocab]
  }
  for (const Segment& s : segments) s.cache->Commit(s.count);
}

}  // namespace tq
