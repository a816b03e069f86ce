// The MoE block: route, group the routed rows by expert on the host, run each expert once over
// its rows (gather -> gate/up -> act·mul -> down -> weighted scatter-add). Resident experts run
// as grouped matmuls: one GroupedMatMul for every expert's gate/up, one for every down (the
// backend runs the experts side by side), with the same backend calls per expert as one expert
// after another would make, so the results are the same bits.
#include "model/moe_forward.h"

#include <algorithm>
#include <array>

#include "kernels/grouped_matmul.h"
#include "model/expert_cache.h"
#include "model/linear.h"
#include "model/moe_routing.h"
#include "model/packed_linear.h"
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

// The distinct input rotations of one stage's packed linears (at most 2: gate and up may have
// their own), and whether some linear takes the input as it is (dense or unrotated packed).
struct StageInputs {
  std::array<const PackedLinear*, 2> rotated{};  // a linear per distinct rotation
  int count = 0;
  bool plain = false;
  // False when a linear is neither dense nor packed, or a third rotation turns up.
  bool Add(const Linear& l) {
    const PackedLinear* p = l.AsPacked();
    if (!p) {
      plain = true;
      return l.AsDense() != nullptr;
    }
    if (!p->rotation()) {
      plain = true;
      return true;
    }
    for (int i = 0; i < count; ++i)
      if (rotated[size_t(i)]->rotation() == p->rotation()) return true;
    if (count == 2) return false;
    rotated[size_t(count++)] = p;
    return true;
  }
};

// x [S, in] under each rotation of `in`: in place when it is the only form needed, else into
// ws.expert_rot. rot[i] is the input of linears with in.rotated[i]'s rotation.
void RotateStage(Backend& be, const StageInputs& in, float* x, int64_t S, int64_t dim, Buf& ws,
                 std::array<const float*, 2>& rot) {
  for (int i = 0; i < in.count; ++i) {
    const bool inplace = in.count == 1 && !in.plain;
    float* out = inplace ? x : Buf::Need(be, ws.expert_rot[i], S * dim, "the MoE workspace");
    be.Rotate(in.rotated[size_t(i)]->rotation_view(), x, S, out);
    rot[size_t(i)] = out;
  }
}

// The input of `l` for rows [b, ..): x itself or its rotated copy.
const float* InputOf(const Linear& l, const StageInputs& in, const float* x,
                     const std::array<const float*, 2>& rot) {
  const PackedLinear* p = l.AsPacked();
  if (!p || !p->rotation()) return x;
  for (int i = 0; i < in.count; ++i)
    if (in.rotated[size_t(i)]->rotation() == p->rotation()) return rot[size_t(i)];
  return x;  // not reached: every rotation was added
}

// The backend call `l->MatMul` (or, for two dense linears over the same rows, MatMulShared's
// MatMulGroup) makes for rows [b, b + c) of a stage, as a grouped item.
void AddItems(std::span<const Linear* const> ls, std::span<float* const> ys, const float* x,
              int64_t c, Buf& ws, const StageInputs& in, const std::array<const float*, 2>& rot,
              int64_t row_offset) {
  const int64_t cols = ls[0]->in_features();
  bool all_dense = ls.size() > 1;
  for (const Linear* l : ls) all_dense = all_dense && l->AsDense();
  if (all_dense) {
    const size_t first = ws.grouped_outs.size();
    for (size_t i = 0; i < ls.size(); ++i) {
      const DenseLinear* d = ls[i]->AsDense();
      ws.grouped_outs.push_back({&d->device_weight(), d->bias_data(), ys[i]});
    }
    ws.grouped_items.push_back({x + row_offset * cols,
                                c,
                                nullptr,
                                nullptr,
                                nullptr,
                                {&ws.grouped_outs[first], ls.size()}});
    return;
  }
  for (size_t i = 0; i < ls.size(); ++i) {
    if (const PackedLinear* p = ls[i]->AsPacked()) {
      const float* xi = InputOf(*ls[i], in, x, rot) + row_offset * cols;
      ws.grouped_items.push_back({xi, c, &p->device_matrix(), p->bias_device(), ys[i], {}});
    } else {
      const DenseLinear* d = ls[i]->AsDense();
      ws.grouped_outs.push_back({&d->device_weight(), d->bias_data(), ys[i]});
      ws.grouped_items.push_back(
          {x + row_offset * cols, c, nullptr, nullptr, nullptr, {&ws.grouped_outs.back(), 1}});
    }
  }
}

// Experts [e0, e1) (their slots [b0, b1) of slot_row / slot_weight) as two GroupedMatMuls:
// gather -> rotate -> every gate/up -> act per expert -> rotate -> every down -> scatter-add.
// `one_token`: every slot is the same row of h, so every gate / up product reads the first
// gathered row (one input: a device runs them as grouped launches).
void GroupedChunk(Backend& be, const MoeBlock& moe, const float* h, int64_t hidden, int64_t ffn,
                  int64_t e0, int64_t e1, const StageInputs& in1, const StageInputs& in2,
                  const int32_t* slot_row, const float* slot_weight, float* x, Buf& ws,
                  bool one_token) {
  const int64_t b0 = ws.expert_begin[size_t(e0)], S = ws.expert_begin[size_t(e1)] - b0;
  float* xg = Buf::Need(be, ws.expert_in, S * hidden, "the MoE workspace");   // [S, hidden]
  float* g = Buf::Need(be, ws.gate, S * ffn, "the MLP workspace");            // [S, ffn]
  float* u = Buf::Need(be, ws.up, S * ffn, "the MLP workspace");              // [S, ffn]
  float* yg = Buf::Need(be, ws.expert_out, S * hidden, "the MoE workspace");  // [S, hidden]
  be.GatherRows(h, slot_row + b0, S, hidden, xg);
  std::array<const float*, 2> rot{};
  RotateStage(be, in1, xg, S, hidden, ws, rot);
  // Items point into grouped_outs: reserved so that it never moves.
  ws.grouped_items.clear();
  ws.grouped_outs.clear();
  ws.grouped_items.reserve(size_t(2 * (e1 - e0)));
  ws.grouped_outs.reserve(size_t(2 * (e1 - e0)));
  for (int64_t e = e0; e < e1; ++e) {
    const int64_t b = ws.expert_begin[size_t(e)] - b0, c = ws.expert_begin[size_t(e) + 1] - b0 - b;
    if (c == 0) continue;
    const GatedMlp& m = moe.experts[size_t(e)];
    const Linear* ls[] = {m.gate.get(), m.up.get()};
    float* ys[] = {g + b * ffn, u + b * ffn};
    AddItems(ls, ys, xg, c, ws, in1, rot, one_token ? 0 : b);
  }
  kernels::GroupedMatMul(be, ws.grouped_items);
  // Elementwise over the chunk's [S, ffn] rows at once: what expert after expert computes.
  GatedAct(be, moe.act, g, u, S * ffn);
  RotateStage(be, in2, g, S, ffn, ws, rot);
  ws.grouped_items.clear();
  ws.grouped_outs.clear();
  for (int64_t e = e0; e < e1; ++e) {
    const int64_t b = ws.expert_begin[size_t(e)] - b0, c = ws.expert_begin[size_t(e) + 1] - b0 - b;
    if (c == 0) continue;
    const Linear* ls[] = {moe.experts[size_t(e)].down.get()};
    float* ys[] = {yg + b * hidden};
    AddItems(ls, ys, g, c, ws, in2, rot, b);
  }
  kernels::GroupedMatMul(be, ws.grouped_items);
  // Slots in order, as expert after expert adds them.
  be.ScatterAddRows(yg, slot_row + b0, slot_weight + b0, S, hidden, x);
}

// The resident experts as grouped matmuls, in runs of consecutive experts of at most
// max(n, kMinGroupedSlots) slots (so the workspace stays [n, ...] as one expert at a time needs;
// an expert has at most n rows). False (nothing done) when a linear is neither dense nor packed
// or a stage has more than two input rotations.

bool GroupedExperts(Backend& be, const MoeBlock& moe, const float* h, int64_t n, int64_t hidden,
                    const int32_t* slot_row, const float* slot_weight, float* x, Buf& ws) {
  const int64_t num_experts = int64_t(moe.experts.size());
  StageInputs in1, in2;
  int64_t ffn = -1;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (ws.expert_begin[size_t(e) + 1] == ws.expert_begin[size_t(e)]) continue;
    const GatedMlp& m = moe.experts[size_t(e)];
    if (!in1.Add(*m.gate) || !in1.Add(*m.up) || !in2.Add(*m.down)) return false;
    if (ffn >= 0 && m.gate->out_features() != ffn) return false;
    ffn = m.gate->out_features();
  }
  const int64_t cap = std::max(n, kMinGroupedSlots);
  for (int64_t e0 = 0; e0 < num_experts;) {
    int64_t e1 = e0 + 1;
    while (e1 < num_experts && ws.expert_begin[size_t(e1) + 1] - ws.expert_begin[size_t(e0)] <= cap)
      ++e1;
    if (ws.expert_begin[size_t(e1)] > ws.expert_begin[size_t(e0)])
      GroupedChunk(be, moe, h, hidden, ffn, e0, e1, in1, in2, slot_row, slot_weight, x, ws, n == 1);
    e0 = e1;
  }
  return true;
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
  if (!stream.cache && !moe.streamed &&
      GroupedExperts(be, moe, h, n, hidden, slot_row, slot_weight, x, ws))
    return;
  // Streamed (each expert acquired from the cache in turn) or of another kind: one by one.
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
