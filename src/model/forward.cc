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
//
// Every computation is an op of the model's Backend (kernels/backend.h) on buffers in its memory,
// so the same pass runs on ref, cpu and cuda. The host builds the step descriptor (positions,
// logit rows) and, for MoE layers, groups the routed rows by expert; the only waits on a device
// are reading the chosen experts (MoE layers) and the logits at the end.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/backend.h"
#include "model/expert_cache.h"
#include "model/model.h"
#include "model/moe_forward.h"
#include "model/packed_linear.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {
namespace {

using Buf = ForwardWorkspace;
using kernels::Backend;

// x [n, hidden] += down(silu(gate(h)) * up(h)); y: [n, hidden] scratch.
void GatedMlpForward(Backend& be, const GatedMlp& m, const float* h, int64_t n, float* x, Buf& ws,
                     float* y) {
  const int64_t ffn = m.gate->out_features(), hidden = m.down->out_features();
  float* g = Buf::Need(be, ws.gate, n * ffn, "the MLP workspace");  // [n, ffn]
  float* u = Buf::Need(be, ws.up, n * ffn, "the MLP workspace");    // [n, ffn]
  const Linear* group[] = {m.gate.get(), m.up.get()};
  float* outs[] = {g, u};
  MatMulShared(be, group, h, n, outs);
  be.SiluMul(g, u, n * ffn, g);
  m.down->MatMul(be, g, n, y);  // [n, hidden]
  be.Add(x, y, n * hidden);
}

}  // namespace

void Model::Run(std::span<const int32_t> tokens, std::span<const Segment> segments,
                std::span<const int64_t> logit_rows, float* logits) {
  const ModelConfig& c = config_;
  const ModelWeights& w = *weights_;
  Buf& ws = *ws_;
  Backend& be = *backend_;
  const int64_t n = int64_t(tokens.size()), hidden = c.hidden_size, hd = c.head_dim;
  const int64_t heads = c.num_heads, kv_heads = c.num_kv_heads;
  const int64_t qdim = heads * hd, kvdim = kv_heads * hd;
  const float eps = float(c.rms_norm_eps);

  // The step descriptor: token ids and positions in the backend's memory.
  ws.positions_host.resize(size_t(n));
  for (const Segment& s : segments)
    for (int64_t i = 0; i < s.count; ++i)
      ws.positions_host[size_t(s.begin + i)] = s.cache->size() + i;
  const int32_t* ids = Buf::Stage(be, ws.ids, tokens.data(), n, "the token ids");
  const int64_t* positions =
      Buf::Stage(be, ws.positions, ws.positions_host.data(), n, "the positions");

  float* x = Buf::Need(be, ws.x, n * hidden, "the residual stream");  // [n, hidden]
  float* h = Buf::Need(be, ws.h, n * hidden, "the activations");      // [n, hidden]
  float* y = Buf::Need(be, ws.y, n * hidden, "the activations");      // [n, hidden]
  float* q = Buf::Need(be, ws.q, n * qdim, "the queries");            // [n, heads, hd]
  float* k = Buf::Need(be, ws.k, n * kvdim, "the keys");              // [n, kv_heads, hd]
  float* v = Buf::Need(be, ws.v, n * kvdim, "the values");            // [n, kv_heads, hd]
  if (w.embed_packed) {
    be.PackedEmbedRows(w.embed_packed->device_matrix(), ids, n, x);
  } else {
    be.EmbedRows(w.embed_device, ids, n, x);
  }

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    // --- self-attention ---
    be.RmsNorm(x, n, hidden, L.attn_norm.data(), eps, h);
    const Linear* qkv[] = {L.q.get(), L.k.get(), L.v.get()};
    float* qkv_out[] = {q, k, v};
    MatMulShared(be, qkv, h, n, qkv_out);
    if (!L.q_norm.empty()) {
      be.RmsNorm(q, n * heads, hd, L.q_norm.data(), eps, q);
      be.RmsNorm(k, n * kv_heads, hd, L.k_norm.data(), eps, k);
    }
    const float* inv_freq = w.rope_inv_freq.data();
    be.Rope(q, n, heads, hd, positions, inv_freq, w.rope.attention_factor);
    be.Rope(k, n, kv_heads, hd, positions, inv_freq, w.rope.attention_factor);
    float* attn = Buf::Need(be, ws.attn, n * qdim, "the attention output");  // [n, heads, hd]
    for (const Segment& s : segments) {
      s.cache->Append(l, k + s.begin * kvdim, v + s.begin * kvdim, s.count);
      s.cache->Attend(l, q + s.begin * qdim, s.count, attn + s.begin * qdim);
    }
    L.o->MatMul(be, attn, n, y);  // [n, hidden]
    be.Add(x, y, n * hidden);
    // --- feed-forward ---
    be.RmsNorm(x, n, hidden, L.ffn_norm.data(), eps, h);
    if (L.moe) {
      MoeStreaming st;
      if (expert_cache_) {
        st.cache = expert_cache_.get();
        st.layer = l;
        st.eps = eps;
        for (int64_t l2 = l + 1; l2 < c.num_layers && !st.next; ++l2) {
          if (!w.layers[size_t(l2)].moe) continue;
          st.next = w.layers[size_t(l2)].moe.get();
          st.next_layer = l2;
          st.next_ffn_norm = w.layers[size_t(l2)].ffn_norm.data();
        }
      }
      MoeForward(be, *L.moe, h, n, hidden, x, ws, st);
    } else {
      GatedMlpForward(be, *L.mlp, h, n, x, ws, y);
    }
  }

  // Logits only for the rows asked for: the one wait of a step on a device.
  const int64_t m = int64_t(logit_rows.size());
  if (m > 0) {
    ws.logit_rows32.assign(logit_rows.begin(), logit_rows.end());
    const int32_t* rows =
        Buf::Stage(be, ws.logit_rows, ws.logit_rows32.data(), m, "the logit rows");
    be.GatherRows(x, rows, m, hidden, h);
    be.RmsNorm(h, m, hidden, w.final_norm.data(), eps, h);
    const bool host = be.memory_space() == MemorySpace::kHost;
    float* out = host ? logits : Buf::Need(be, ws.logits, m * c.vocab_size, "the logits");
    w.lm_head->MatMul(be, h, m, out);  // [m, vocab]
    if (!host) be.Download(logits, out, size_t(m * c.vocab_size) * sizeof(float));
  } else {
    be.Synchronize();
  }
  for (const Segment& s : segments) s.cache->Commit(s.count);
}

}  // namespace tq
