// The MoE block: route, group the routed rows by expert on the host, run each expert once over
// its rows (gather -> gate/up -> act·mul -> down -> weighted scatter-add).
#include "model/moe_forward.h"

#include <algorithm>

#include "model/expert_cache.h"
#include "model/linear.h"
#include "model/moe_routing.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {

using Buf = ForwardWorkspace;
using kernels::Backend;

// x [n, hidden] += Σ_{e in top-k(router(h))} p_e · expert_e(h). Tokens are grouped by expert so
// each expert runs one matmul over the rows routed to it (gather -> GEMM -> weighted scatter).
// Seam for packed experts: all experts of one projection share an input rotation, so h could be
// rotated once here, before the gather, instead of per expert inside MatMulShared.
// act(gate) * up into g (the layer's activation: SiLU, GELU-tanh or gpt_oss's clamped SwiGLU).
void GatedAct(Backend& be, Activation act, float* g, const float* u, int64_t count) {
  if (act == Activation::kGeluTanh) {
    be.GeluTanhMul(g, u, count, g);
  } else if (act == Activation::kClampedSwiglu) {
    be.ClampedSwiglu(g, u, count, {}, g);
  } else {
    be.SiluMul(g, u, count, g);
  }
}

namespace {

// The experts the next MoE layer will probably use: its router on RMSNorm(x, its norm), x the
// residual before this layer's MoE (skipping this MoE block and the next attention block).
// Distinct expert ids, most often chosen first, into ws.predicted_host.
void PredictNextExperts(Backend& be, const MoeStreaming& s, const float* x, int64_t n,
                        int64_t hidden, Buf& ws) {
  const MoeBlock& next = *s.next;
  const int64_t e_count = int64_t(next.experts.size()), top_k = next.top_k;
  float* hn = Buf::Need(be, ws.predict_h, n * hidden, "the MoE prefetch prediction");
  be.RmsNorm(x, n, hidden, s.next_ffn_norm, s.eps, hn);
  float* probs = Buf::Need(be, ws.predict_probs, n * e_count, "the MoE prefetch prediction");
  next.router->MatMul(be, hn, n, probs);
  int32_t* chosen = Buf::Need<int32_t>(be, ws.predict_chosen, n * top_k, "the MoE prediction");
  float* weight = Buf::Need(be, ws.predict_weight, n * top_k, "the MoE prefetch prediction");
  be.MoeRoute(probs, n, {e_count, top_k, next.renormalize}, chosen, weight);
  std::vector<int32_t>& c = ws.predicted_host;
  c.resize(size_t(n * top_k));
  be.Download(c.data(), chosen, c.size() * sizeof(int32_t));
  std::vector<int64_t>& count = ws.predict_count;
  count.assign(size_t(e_count), 0);
  for (int32_t e : c) ++count[size_t(e)];
  c.clear();
  for (int32_t e = 0; e < int32_t(e_count); ++e)
    if (count[size_t(e)] > 0) c.push_back(e);
  std::stable_sort(c.begin(), c.end(),
                   [&](int32_t a, int32_t b) { return count[size_t(a)] > count[size_t(b)]; });
}

}  // namespace

void MoeForward(Backend& be, const MoeBlock& moe, const float* h, int64_t n, int64_t hidden,
                float* x, Buf& ws, const MoeStreaming& stream) {
  const int64_t num_experts = int64_t(moe.experts.size()), top_k = moe.top_k;
  float* probs = Buf::Need(be, ws.router_probs, n * num_experts, "the MoE router");  // [n, E]
  moe.router->MatMul(be, h, n, probs);
  if (moe.router_kind == Router::kSigmoidGroupTopK) {
    // deepseek_v3: routed on the host from the logits (moe_routing.h).
    ws.router_logits_host.resize(size_t(n * num_experts));
    be.Download(ws.router_logits_host.data(), probs, size_t(n * num_experts) * sizeof(float));
    GroupTopKRule rule{
        num_experts,     top_k,
        moe.n_group,     moe.topk_group,
        moe.renormalize, moe.correction_bias.empty() ? nullptr : moe.correction_bias.data()};
    SigmoidGroupTopK(ws.router_logits_host.data(), n, rule, ws.chosen_host, ws.chosen_weight_host);
  } else {
    int32_t* chosen = Buf::Need<int32_t>(be, ws.chosen, n * top_k, "the MoE router");
    float* chosen_w = Buf::Need(be, ws.chosen_weight, n * top_k, "the MoE router");
    be.MoeRoute(probs, n, {num_experts, top_k, moe.renormalize}, chosen, chosen_w);
    // Grouping by expert on the host (a device waits here for the n * top_k choices).
    ws.chosen_host.resize(size_t(n * top_k));
    ws.chosen_weight_host.resize(size_t(n * top_k));
    be.Download(ws.chosen_host.data(), chosen, size_t(n * top_k) * sizeof(int32_t));
    be.Download(ws.chosen_weight_host.data(), chosen_w, size_t(n * top_k) * sizeof(float));
  }
  ws.expert_count.assign(size_t(num_experts), 0);
  for (int32_t e : ws.chosen_host) ++ws.expert_count[size_t(e)];
  // Counting sort of (row, weight) slots by expert.
  ws.expert_begin.assign(size_t(num_experts) + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e)
    ws.expert_begin[size_t(e) + 1] = ws.expert_begin[size_t(e)] + ws.expert_count[size_t(e)];
  ws.slot_row_host.resize(size_t(n * top_k));
  ws.slot_weight_host.resize(size_t(n * top_k));
  std::vector<int64_t>& fill = ws.expert_count;  // reused as the fill cursor
  for (int64_t e = 0; e < num_experts; ++e) fill[size_t(e)] = ws.expert_begin[size_t(e)];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = ws.chosen_host[size_t(r * top_k + j)];
      const int64_t s = fill[size_t(e)]++;
      ws.slot_row_host[size_t(s)] = int32_t(r);
      ws.slot_weight_host[size_t(s)] =
          ws.chosen_weight_host[size_t(r * top_k + j)] * moe.routed_scale;  // deepseek
    }
  }
  if (stream.cache) {
    // This layer's misses read in parallel (before the next layer's prefetch).
    ws.used_host.clear();
    for (int64_t e = 0; e < num_experts; ++e)
      if (ws.expert_begin[size_t(e) + 1] > ws.expert_begin[size_t(e)])
        ws.used_host.push_back(int32_t(e));
    stream.cache->ReadAhead(stream.layer, ws.used_host);
  }
  if (stream.cache && stream.next) {
    // Start reading the next layer's likely experts while this layer computes; keep this
    // layer's chosen experts.
    PredictNextExperts(be, stream, x, n, hidden, ws);
    stream.cache->Prefetch(stream.next_layer, ws.predicted_host, stream.layer, ws.used_host);
  }
  const int32_t* slot_row =
      Buf::Stage(be, ws.slot_row, ws.slot_row_host.data(), n * top_k, "the MoE grouping");
  const float* slot_weight =
      Buf::Stage(be, ws.slot_weight, ws.slot_weight_host.data(), n * top_k, "the MoE grouping");
  float* xg = Buf::Need(be, ws.expert_in, n * hidden, "the MoE workspace");   // gathered inputs
  float* yg = Buf::Need(be, ws.expert_out, n * hidden, "the MoE workspace");  // expert outputs
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t b = ws.expert_begin[size_t(e)], c = ws.expert_begin[size_t(e) + 1] - b;
    if (c == 0) continue;
    be.GatherRows(h, slot_row + b, c, hidden, xg);
    const GatedMlp& m =
        stream.cache ? stream.cache->Acquire(stream.layer, e) : moe.experts[size_t(e)];
    const int64_t ffn = m.gate->out_features();
    float* g = Buf::Need(be, ws.gate, c * ffn, "the MLP workspace");
    float* u = Buf::Need(be, ws.up, c * ffn, "the MLP workspace");
    const Linear* group[] = {m.gate.get(), m.up.get()};
    float* outs[] = {g, u};
    MatMulShared(be, group, xg, c, outs);
    GatedAct(be, moe.act, g, u, c * ffn);
    m.down->MatMul(be, g, c, yg);
    be.ScatterAddRows(yg, slot_row + b, slot_weight + b, c, hidden, x);
  }
}

}  // namespace tq
