// The generic decoder forward pass, written once for every architecture and driven by the
// per-layer spec (layer_spec.h; norms of RMSNorm × (1 + w) families are stored plus one):
//
//   x = embed(tokens) [× embed_scale: gemma]
//   for each layer:
//     h = RMSNorm(x);  q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ  (+ biases: qwen2; fused qkv: phi3 rows)
//     q, k = RMSNorm_per_head(q), RMSNorm_per_head(k)   (qwen3, gemma3)
//     q, k = RoPE(q, pos), RoPE(k, pos)                 (the layer's table: gemma3 local/global;
//                                                        partial rotary: qwen3_next)
//     cache ← (k, v);  a = softmax(softcap(q·kᵀ·scale) [, sink], causal [, window]) · v
//     [a ×= sigmoid(gate): q_proj's gate half, qwen3_next]
//     — or a Gated DeltaNet / Mamba-2 mixer on the sequence's recurrent state
//       (recurrent_forward.h),
//       or multi-head latent attention (deepseek) —
//     y = a·Woᵀ [→ RMSNorm: sandwich];  x += y
//     h = RMSNorm(x);  y = MLP(h) [→ RMSNorm: sandwich]  or  MoE(h) [+ gated shared expert]
//     x += y        (MLP activation: SiLU, GELU-tanh, gpt_oss's clamped SwiGLU; ungated ReLU²)
//   (nemotron_h: a layer is a mixer or an FFN, each behind its one norm)
//   logits = softcap(RMSNorm(x)·W_lmᵀ)
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
#include <cmath>
#include <cstring>
#include <exception>
#include <numeric>

#include "core/error.h"
#include "kernels/backend.h"
#include "model/expert_cache.h"
#include "model/model.h"
#include "model/moe_forward.h"
#include "model/packed_linear.h"
#include "model/recurrent_forward.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {
namespace {

using Buf = ForwardWorkspace;
using kernels::Backend;

// y [n, hidden] = down(act(gate(h)) * up(h)), or down(relu²(up(h))) when ungated (no gate).
void GatedMlpForward(Backend& be, const GatedMlp& m, Activation act, const float* h, int64_t n,
                     Buf& ws, float* y) {
  if (!m.gate) {
    const int64_t ffn = m.up->out_features();
    float* u = Buf::Need(be, ws.up, n * ffn, "the MLP workspace");  // [n, ffn]
    m.up->MatMul(be, h, n, u);
    be.Relu2(u, n * ffn, u);
    m.down->MatMul(be, u, n, y);  // [n, hidden]
    return;
  }
  const int64_t ffn = m.gate->out_features();
  float* g = Buf::Need(be, ws.gate, n * ffn, "the MLP workspace");  // [n, ffn]
  float* u = Buf::Need(be, ws.up, n * ffn, "the MLP workspace");    // [n, ffn]
  const Linear* group[] = {m.gate.get(), m.up.get()};
  float* outs[] = {g, u};
  MatMulShared(be, group, h, n, outs);
  const PackedLinear* down = m.down->AsPacked();
  if (act == Activation::kSilu && down && down->rotation()) {
    // The down projection's input rotation rides with the SwiGLU product (one pass on a GPU).
    be.SiluMulRotate(g, u, n, down->rotation_view(), g);
    down->MatMulRotated(be, g, n, y);  // [n, hidden]
    return;
  }
  GatedAct(be, act, g, u, n * ffn);
  m.down->MatMul(be, g, n, y);  // [n, hidden]
}

// A decode step (at most kGraphTokens tokens) as one device graph (Backend::BeginStep): the
// backend records the step's ops up to its sync point (the logits' download) and runs them as
// one launch. The key names what changes a step's kernels: tokens, sequences, logit rows, the
// output kind. EndStep also runs on an exception (its errors then dropped for the first).
constexpr int64_t kGraphTokens = 8;
class StepGraph {
 public:
  StepGraph(Backend& be, int64_t n, size_t segments, size_t logit_rows, bool hidden)
      : be_(be), on_(n <= kGraphTokens) {
    if (on_)
      be_.BeginStep(n << 20 | int64_t(std::min<size_t>(segments, 1023)) << 10 |
                    int64_t(std::min<size_t>(logit_rows, 511)) << 1 | (hidden ? 1 : 0));
  }
  void End() {
    if (on_) on_ = false, be_.EndStep();
  }
  ~StepGraph() {
    try {
      End();
    } catch (const std::exception&) {  // unwinding already: the first error is the one to see
    }
  }

 private:
  Backend& be_;
  bool on_;
};

}  // namespace

void Model::Run(std::span<const int32_t> tokens, std::span<const Segment> segments,
                std::span<const int64_t> logit_rows, float* logits) {
  const ModelConfig& c = config_;
  const ModelWeights& w = *weights_;
  const ModelSpec& spec = w.spec;
  Buf& ws = *ws_;
  Backend& be = *backend_;
  const CacheGeometry geo = CacheGeometryOf(spec);
  const int64_t n = int64_t(tokens.size()), hidden = c.hidden_size, hd = geo.head_dim;
  const int64_t heads = geo.heads, kv_heads = geo.kv_heads;
  const int64_t qdim = heads * hd, kvdim = kv_heads * hd;
  const float eps = float(c.rms_norm_eps);

  StepGraph graph(be, n, segments.size(), logit_rows.size(), hidden_rows_);
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
  // q [n, heads, hd] and k [n, kv_heads, hd] in one buffer, k right after q: one token's RoPE
  // of both is one call.
  float* q = Buf::Need(be, ws.qk, n * (qdim + kvdim), "the queries and keys");
  float* k = q + n * qdim;
  float* v = Buf::Need(be, ws.v, n * kvdim, "the values");  // [n, kv_heads, hd]
  if (w.embed_packed) {
    be.PackedEmbedRows(w.embed_packed->device_matrix(), ids, n, x);
  } else {
    be.EmbedRows(w.embed_device, ids, n, x);
  }

  if (spec.embed_scale != 1.0f) be.Scale(x, n * hidden, spec.embed_scale);  // gemma

  // Per-layer inputs (gemma4): P [n, layers, d] = (RMSNorm(x·W_projᵀ / sqrt(hidden)) per d +
  // E_pl[ids] · sqrt(d)) / sqrt(2), ids past the per-layer vocabulary reading row 0. Index
  // lists: [ids (n) | layer l's rows t·layers + l (n per layer)].
  const int64_t ple_d = spec.per_layer_input_dim, num_layers = c.num_layers;
  float* ple = nullptr;
  const int32_t* ple_idx = nullptr;
  if (ple_d > 0) {
    std::vector<int32_t>& I = ws.ple_idx_host;
    I.resize(size_t(n * (num_layers + 1)));
    for (int64_t t = 0; t < n; ++t) {
      const int32_t id = tokens[size_t(t)];
      I[size_t(t)] = id < spec.per_layer_vocab ? id : 0;
      for (int64_t l = 0; l < num_layers; ++l)
        I[size_t(n + l * n + t)] = int32_t(t * num_layers + l);
    }
    ple_idx = Buf::Stage(be, ws.ple_idx, I.data(), int64_t(I.size()), "the per-layer input lists");
    const int64_t width = n * num_layers * ple_d;
    ple = Buf::Need(be, ws.ple_in, width, "the per-layer inputs");  // [n, layers, d]
    float* proj = Buf::Need(be, ws.ple_tmp, width, "the per-layer inputs");
    be.EmbedRows(w.ple_embed_device, ple_idx, n, ple);
    be.Scale(ple, width, std::sqrt(float(ple_d)));
    w.ple_model_proj->MatMul(be, x, n, proj);
    be.Scale(proj, width, 1.0f / std::sqrt(float(hidden)));
    be.RmsNorm(proj, n * num_layers, ple_d, w.ple_proj_norm.data(), eps, proj);
    be.Add(ple, proj, width);
    be.Scale(ple, width, 1.0f / std::sqrt(2.0f));
  }
  // After a layer (gemma4): x += RMSNorm(W_proj · (act(W_gate · x) ⊙ P[:, l])); x ×= scalar.
  // The residual add of a dense MLP's output is left pending and done with the next norm of x
  // (Backend::AddRmsNorm: one kernel on a device instead of two); anything else that reads x
  // first flushes it.
  const float* pending = nullptr;
  auto flush = [&] {
    if (pending) be.Add(x, pending, n * hidden);
    pending = nullptr;
  };
  auto norm_x = [&](const float* weight) {  // h = RmsNorm(x (+ the pending residual))
    if (pending) {
      be.AddRmsNorm(x, pending, n, hidden, weight, eps, h);
      pending = nullptr;
    } else {
      be.RmsNorm(x, n, hidden, weight, eps, h);
    }
  };
  auto layer_tail = [&](const LayerWeights& L, const LayerSpec& S, int64_t l) {
    if (S.per_layer_input || L.layer_scalar != 1.0f) flush();
    if (S.per_layer_input) {
      float* g = Buf::Need(be, ws.ple_gate, n * ple_d, "the per-layer input gate");
      float* slice = Buf::Need(be, ws.ple_slice, n * ple_d, "the per-layer input gate");
      L.ple_gate->MatMul(be, x, n, g);
      be.GatherRows(ple, ple_idx + n + l * n, n, ple_d, slice);
      GatedAct(be, S.ffn.act, g, slice, n * ple_d);
      L.ple_proj->MatMul(be, g, n, y);
      be.RmsNorm(y, n, hidden, L.ple_post_norm.data(), eps, y);
      be.Add(x, y, n * hidden);
    }
    if (L.layer_scalar != 1.0f) be.Scale(x, n * hidden, L.layer_scalar);
  };
  // Softmax attention: y [n, hidden] = o(attend(RoPE(q(h)), RoPE(k(h)), v(h))).
  // Output-gated attention (qwen3_next, qwen3_5): q_proj rows are [q | gate] per head; the
  // gather lists split them (rows of hd floats: q = rows 2r, gate = rows 2r + 1, r < n·heads).
  const int32_t* gate_idx = nullptr;
  if (std::any_of(spec.layers.begin(), spec.layers.end(),
                  [](const LayerSpec& S) { return S.HasKvCache() && S.attn.output_gate; })) {
    std::vector<int32_t>& I = ws.gate_idx_host;
    I.resize(size_t(2 * n * heads));
    for (int64_t r = 0; r < n * heads; ++r) {
      I[size_t(r)] = int32_t(2 * r);
      I[size_t(n * heads + r)] = int32_t(2 * r + 1);
    }
    gate_idx = Buf::Stage(be, ws.gate_idx, I.data(), int64_t(I.size()), "the gate gather lists");
  }
  // Layers narrower than the cache's head_dim (gemma4's sliding layers): q, k, v at the layer's
  // size lhd in a staging buffer P = [q n·heads·lhd | k n·kv·lhd | v n·kv·lhd | zeros c], padded
  // into q/k/v by gathers of c = gcd(lhd, hd) floats, and the output compacted back into P.
  // One set of lists per narrower size: [q | k | v | out] (pad_lists[lhd] = its offset).
  std::vector<std::pair<int64_t, int64_t>> pad_lists;  // (lhd, offset)
  auto pad_chunk = [&](int64_t lhd) { return std::gcd(lhd, hd); };
  auto pad_zero_at = [&](int64_t lhd) { return n * (heads + 2 * kv_heads) * lhd; };
  {
    std::vector<int32_t>& I = ws.pad_idx_host;
    I.clear();
    for (const LayerSpec& S : spec.layers) {
      const int64_t lhd = S.attn.head_dim;
      if (S.mixer != MixerKind::kAttention || lhd == hd) continue;
      if (std::any_of(pad_lists.begin(), pad_lists.end(),
                      [&](const auto& p) { return p.first == lhd; }))
        continue;
      pad_lists.emplace_back(lhd, int64_t(I.size()));
      const int64_t c = pad_chunk(lhd), zero = pad_zero_at(lhd) / c;
      auto pad = [&](int64_t base, int64_t rows) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < lhd / c; ++i) I.push_back(int32_t((base + r * lhd) / c + i));
          for (int64_t i = lhd / c; i < hd / c; ++i) I.push_back(int32_t(zero));
        }
      };
      pad(0, n * heads);
      pad(n * heads * lhd, n * kv_heads);
      pad(n * (heads + kv_heads) * lhd, n * kv_heads);
      for (int64_t r = 0; r < n * heads; ++r)
        for (int64_t i = 0; i < lhd / c; ++i) I.push_back(int32_t(r * hd / c + i));
    }
  }
  const int32_t* pad_idx =
      pad_lists.empty() ? nullptr
                        : Buf::Stage(be, ws.pad_idx, ws.pad_idx_host.data(),
                                     int64_t(ws.pad_idx_host.size()), "the head padding lists");

  auto attention = [&](const LayerWeights& L, const AttentionSpec& A) {
    const int64_t l = L.kv_index;
    const int64_t lhd = A.head_dim;
    float *lq = q, *lk = k, *lv = v, *P = nullptr;
    const int32_t* pidx = nullptr;
    if (lhd != hd) {
      for (const auto& [d, off] : pad_lists)
        if (d == lhd) pidx = pad_idx + off;
      const int64_t c = pad_chunk(lhd), zero = pad_zero_at(lhd);
      P = Buf::Need(be, ws.pad_buf, zero + c, "the head padding workspace");
      ws.pad_zero_host.assign(size_t(c), 0.0f);
      be.CopyToDevice(P + zero, ws.pad_zero_host.data(), size_t(c) * sizeof(float));
      lq = P;
      lk = P + n * heads * lhd;
      lv = lk + n * kv_heads * lhd;
    }
    float* qg = A.output_gate ? Buf::Need(be, ws.q_gate, 2 * n * qdim, "the gated queries") : lq;
    const Linear* qkv[] = {L.q.get(), L.k.get(), L.v.get()};
    float* qkv_out[] = {qg, lk, lv};
    MatMulShared(be, qkv, h, n, qkv_out);
    float* gate = nullptr;
    if (A.output_gate) {
      gate = Buf::Need(be, ws.attn_gate, n * qdim, "the attention gate");  // [n, heads, hd]
      be.GatherRows(qg, gate_idx, n * heads, hd, q);
      be.GatherRows(qg, gate_idx + n * heads, n * heads, hd, gate);
    }
    if (!L.q_norm.empty()) {
      be.RmsNorm(lq, n * heads, lhd, L.q_norm.data(), eps, lq);
      be.RmsNorm(lk, n * kv_heads, lhd, L.k_norm.data(), eps, lk);
    }
    if (!L.v_norm.empty()) be.RmsNorm(lv, n * kv_heads, lhd, L.v_norm.data(), eps, lv);  // gemma4
    const float* inv_freq = L.rope_inv_freq.data();
    const int64_t rd = A.rope.rotary_dim;
    // Partial rotary (qwen3_next: a quarter of each head) rotates the first rd; proportional
    // (gemma4) turns the whole head with a table whose last frequencies are 0.
    // One token: k follows q (here and in P), so its heads are q's next rows of the same
    // position: one launch for both.
    const bool one = n == 1 && lk == lq + heads * lhd;
    const int64_t qh = one ? heads + kv_heads : heads;
    if (rd < lhd && A.rope.freq_dim != lhd) {
      be.PartialRope(lq, n, qh, lhd, rd, positions, inv_freq, L.rope_attention_factor);
      if (!one)
        be.PartialRope(lk, n, kv_heads, lhd, rd, positions, inv_freq, L.rope_attention_factor);
    } else {
      be.Rope(lq, n, qh, lhd, positions, inv_freq, L.rope_attention_factor);
      if (!one) be.Rope(lk, n, kv_heads, lhd, positions, inv_freq, L.rope_attention_factor);
    }
    if (P) {  // pad to the cache's head_dim
      const int64_t c = pad_chunk(lhd);
      be.GatherRows(P, pidx, n * heads * hd / c, c, q);
      be.GatherRows(P, pidx + n * heads * hd / c, n * kv_heads * hd / c, c, k);
      be.GatherRows(P, pidx + n * (heads + kv_heads) * hd / c, n * kv_heads * hd / c, c, v);
    }
    float* attn = Buf::Need(be, ws.attn, n * qdim, "the attention output");  // [n, heads, hd]
    for (const Segment& s : segments) {
      s.cache->Append(l, k + s.begin * kvdim, v + s.begin * kvdim, s.count);
      s.cache->Attend(l, q + s.begin * qdim, s.count, attn + s.begin * qdim);
    }
    if (gate) be.SigmoidGateRows(attn, gate, n * qdim, 1);  // elementwise × sigmoid(gate)
    if (P) {  // compact [n, heads, hd] -> [n, heads, lhd]
      const int64_t c = pad_chunk(lhd);
      be.GatherRows(attn, pidx + n * (heads + 2 * kv_heads) * hd / c, n * heads * lhd / c, c, P);
    }
    L.o->MatMul(be, P ? P : attn, n, y);  // [n, hidden]
  };

  // Multi-head latent attention (deepseek) on the latent cache: one KV head of width
  // hd = kv_lora + rope that all H query heads read (CacheGeometryOf), with kv_b absorbed
  // (model/mla_absorb.h). Per token and head:
  //   q = [W_UK[h]ᵀ q_nope | RoPE(q_pe)],  k = v = [c_kv | RoPE(k_pe)]  (stored once: the
  //   cache's latent layout, kv_cache.h)
  //   o[h] = W_UV[h] · attn[h][0 .. kv_lora)   (the k_pe channels' outputs are dropped)
  // q·k = q_nope·(W_UK c) + q_pe·k_pe and attn·W_UV = Σ p W_UV c: the expanded form's scores and
  // outputs, at hd floats a token instead of H · (nope + rope + v).
  // Layout work is gathers from one staging buffer B (floats, regions aligned to c):
  //   [q_b out n·H·(nope+rope) | q_lat n·H·kv_lora | q_pe n·H·rope | k_pe n·rope |
  //    c_kv n·kv_lora | k_pe raw n·rope | o n·H·v]
  // in chunks of c = gcd(kv_lora, rope) floats; the rope parts are gathered element by element
  // and de-interleaved (HF's pairs (2i, 2i+1) -> rotate_half pairs (i, i + rope/2): the same
  // permutation of q_pe and k_pe leaves q·k unchanged), then rotated with the Rope op.
  const bool mla = spec.layers[0].mixer == MixerKind::kMla;
  const MlaSpec& M = spec.layers[0].mla;
  const int64_t dn = M.nope_dim, dr = M.rope_dim, dv = M.v_dim, R = M.kv_lora_rank, H = heads;
  const int64_t chunk = mla ? std::gcd(R, dr) : 1;
  auto align = [&](int64_t at) { return (at + chunk - 1) / chunk * chunk; };
  const int64_t b_qlat = align(n * H * (dn + dr)), b_qpe = align(b_qlat + n * H * R);
  const int64_t b_kpe = b_qpe + n * H * dr;  // right after q_pe: one token's RoPE is one call
  const int64_t b_c = align(b_kpe + n * dr), b_kraw = align(b_c + n * R);
  const int64_t b_o = align(b_kraw + n * dr);
  const int32_t* idx = nullptr;  // [pe | q | k] gather lists
  int64_t i_q = 0, i_k = 0;
  if (mla) {
    std::vector<int32_t>& I = ws.mla_idx_host;
    I.clear();
    const bool inter = spec.layers[0].attn.rope.interleaved;
    auto perm = [&](int64_t j) { return inter ? (j < dr / 2 ? 2 * j : 2 * (j - dr / 2) + 1) : j; };
    for (int64_t r = 0; r < n * H; ++r)  // q_pe, from the q_b rows
      for (int64_t j = 0; j < dr; ++j) I.push_back(int32_t(r * (dn + dr) + dn + perm(j)));
    for (int64_t t = 0; t < n; ++t)  // k_pe, from the kv_a rope rows
      for (int64_t j = 0; j < dr; ++j) I.push_back(int32_t(b_kraw + t * dr + perm(j)));
    auto run = [&](int64_t at, int64_t floats) {  // the chunks of B[at .. at + floats)
      for (int64_t i = 0; i < floats / chunk; ++i) I.push_back(int32_t(at / chunk + i));
    };
    i_q = int64_t(I.size());
    for (int64_t r = 0; r < n * H; ++r) {
      run(b_qlat + r * R, R);
      run(b_qpe + r * dr, dr);
    }
    i_k = int64_t(I.size());
    for (int64_t t = 0; t < n; ++t) {
      run(b_c + t * R, R);
      run(b_kpe + t * dr, dr);
    }
    idx = Buf::Stage(be, ws.mla_idx, I.data(), int64_t(I.size()), "the MLA gather lists");
  }
  auto mla_attention = [&](const LayerWeights& L, const MlaSpec& Ms) {
    const int64_t l = L.kv_index;
    float* B = Buf::Need(be, ws.mla_buf, b_o + n * H * dv, "the MLA workspace");
    if (L.mla_q_a) {
      float* qa = Buf::Need(be, ws.mla_qa, n * Ms.q_lora_rank, "the MLA query latent");
      const Linear* group[] = {L.mla_q_a.get(), L.mla_kv_a_c.get(), L.mla_kv_a_pe.get()};
      float* outs[] = {qa, B + b_c, B + b_kraw};
      MatMulShared(be, group, h, n, outs);
      be.RmsNorm(qa, n, Ms.q_lora_rank, L.mla_q_a_norm.data(), eps, qa);
      L.mla_q_b->MatMul(be, qa, n, B);  // [n, H, nope + rope]
    } else {
      const Linear* group[] = {L.q.get(), L.mla_kv_a_c.get(), L.mla_kv_a_pe.get()};
      float* outs[] = {B, B + b_c, B + b_kraw};
      MatMulShared(be, group, h, n, outs);
    }
    be.RmsNorm(B + b_c, n, R, L.mla_kv_a_norm.data(), eps, B + b_c);  // c_kv [n, kv_lora]
    // RoPE on the (de-interleaved) rope parts: q_pe [n, H, rope], then k_pe [n, 1, rope].
    be.GatherRows(B, idx, n * (H + 1) * dr, 1, B + b_qpe);
    const float* inv_freq = L.rope_inv_freq.data();
    if (n == 1) {
      be.Rope(B + b_qpe, 1, H + 1, dr, positions, inv_freq, L.rope_attention_factor);
    } else {
      be.Rope(B + b_qpe, n, H, dr, positions, inv_freq, L.rope_attention_factor);
      be.Rope(B + b_kpe, n, 1, dr, positions, inv_freq, L.rope_attention_factor);
    }
    // q_lat [n, H, kv_lora] = W_UK[h]ᵀ q_nope[h].
    be.HeadMatMul(B, n, L.mla_uk_t.data(), {H, dn, R, dn + dr, R}, B + b_qlat);
    // Assemble q [n, H, hd] and k [n, 1, hd] (also the values); attend; o [n, H, v] = W_UV[h] ·
    // attn[h].
    be.GatherRows(B, idx + i_q, n * H * hd / chunk, chunk, q);
    be.GatherRows(B, idx + i_k, n * hd / chunk, chunk, k);
    float* attn = Buf::Need(be, ws.attn, n * qdim, "the attention output");  // [n, H, hd]
    for (const Segment& s : segments) {
      s.cache->Append(l, k + s.begin * kvdim, k + s.begin * kvdim, s.count);
      s.cache->Attend(l, q + s.begin * qdim, s.count, attn + s.begin * qdim);
    }
    be.HeadMatMul(attn, n, L.mla_uv.data(), {H, R, dv, hd, dv}, B + b_o);
    L.o->MatMul(be, B + b_o, n, y);
  };

  RecurrentStep recurrent(be, spec, n, ws);
  for (const Segment& s : segments) recurrent.AddSegment(s.cache, s.begin, s.count);

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    const LayerSpec& S = spec.layers[size_t(l)];
    // --- mixer (none: nemotron_h's MLP layers) ---
    if (S.mixer != MixerKind::kNone) {
      norm_x(L.attn_norm.data());
      if (S.mixer == MixerKind::kMla) {
        mla_attention(L, S.mla);
      } else if (S.mixer == MixerKind::kGatedDeltaNet) {
        recurrent.RunDeltaNet(L, S.delta, h, eps, y);
      } else if (S.mixer == MixerKind::kMamba2) {
        recurrent.RunMamba2(L, S.mamba, h, y);
      } else {
        attention(L, S.attn);
      }
      if (S.sandwich_norm) be.RmsNorm(y, n, hidden, L.post_attn_norm.data(), eps, y);
      pending = y;
    }
    // --- feed-forward (none: nemotron_h's mixer layers) ---
    if (S.ffn.kind == FfnKind::kNone) {
      flush();
      layer_tail(L, S, l);
      continue;
    }
    norm_x(L.ffn_norm.data());
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
      if (L.shared) {  // the shared expert (qwen2_moe), × sigmoid(h · w_gate) when gated
        GatedMlpForward(be, *L.shared, S.ffn.act, h, n, ws, y);
        if (L.shared_gate) {
          float* g = Buf::Need(be, ws.shared_gate, n, "the shared-expert gate");  // [n, 1]
          L.shared_gate->MatMul(be, h, n, g);
          be.SigmoidGateRows(y, g, n, hidden);
        }
        be.Add(x, y, n * hidden);
      }
    } else {
      GatedMlpForward(be, *L.mlp, S.ffn.act, h, n, ws, y);
      if (S.sandwich_norm) be.RmsNorm(y, n, hidden, L.post_ffn_norm.data(), eps, y);
      pending = y;
    }
    layer_tail(L, S, l);
  }
  flush();

  // Logits only for the rows asked for: the one wait of a step on a device.
  const int64_t m = int64_t(logit_rows.size());
  if (m > 0) {
    ws.logit_rows32.assign(logit_rows.begin(), logit_rows.end());
    const int32_t* rows =
        Buf::Stage(be, ws.logit_rows, ws.logit_rows32.data(), m, "the logit rows");
    be.GatherRows(x, rows, m, hidden, h);
    be.RmsNorm(h, m, hidden, w.final_norm.data(), eps, h);
    if (hidden_rows_) {  // ForwardHidden: the final-normed rows [m, hidden] into `logits`
      be.Download(logits, h, size_t(m * hidden) * sizeof(float));
      graph.End();
      for (const Segment& s : segments) s.cache->Commit(s.count);
      return;
    }
    const bool host = be.memory_space() == MemorySpace::kHost;
    float* out = host ? logits : Buf::Need(be, ws.logits, m * c.vocab_size, "the logits");
    w.lm_head->MatMul(be, h, m, out);  // [m, vocab]
    if (spec.final_logit_softcap > 0) be.Softcap(out, m * c.vocab_size, spec.final_logit_softcap);
    if (!host) be.Download(logits, out, size_t(m * c.vocab_size) * sizeof(float));
  } else {
    be.Synchronize();
  }
  graph.End();
  for (const Segment& s : segments) s.cache->Commit(s.count);
}

}  // namespace tq
