// Activation buffers of the forward pass in the backend's memory, grown to the largest batch seen
// and then reused (no allocation per token; Model::Reserve sizes them once, so device addresses
// stay stable for CUDA graphs). Host staging vectors hold what the host computes per step
// (positions, MoE grouping). Internal to model/.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/device_buffer.h"
#include "kernels/backend.h"
#include "kernels/grouped_matmul.h"

namespace tq {

struct ForwardWorkspace {
  DeviceBuffer x;           // [n, hidden] residual stream
  DeviceBuffer h;           // [n, hidden] normed input of a block
  DeviceBuffer y;           // [n, hidden] block output
  DeviceBuffer qk;          // q [n, heads * head_dim], then k [n, kv_heads * head_dim]
  DeviceBuffer v;           // [n, kv_heads * head_dim]
  DeviceBuffer attn;        // [n, heads * head_dim]
  DeviceBuffer gate, up;    // [n, ffn]
  DeviceBuffer ids;         // [n] int32 token ids (device backends)
  DeviceBuffer positions;   // [n] int64 (device backends)
  DeviceBuffer logit_rows;  // [m] int32 rows whose logits are wanted (device backends)
  DeviceBuffer logits;      // [m, vocab] (device backends; host ones write the caller's array)
  // MoE routing.
  DeviceBuffer router_probs;   // [n, experts]
  DeviceBuffer chosen;         // [n, top_k] int32 expert ids
  DeviceBuffer chosen_weight;  // [n, top_k]
  DeviceBuffer slot_row;       // [n * top_k] int32 rows grouped by expert
  DeviceBuffer slot_weight;    // [n * top_k]
  DeviceBuffer expert_in;      // [rows of one expert or a run of them (<= max(n, 64)), hidden]
  DeviceBuffer expert_out;     // [the same rows, hidden] expert outputs
  DeviceBuffer shared_gate;    // [n] shared-expert gate logits (qwen2_moe)
  DeviceBuffer q_gate;         // [n, heads, 2 * head_dim] output-gated q_proj rows
  DeviceBuffer attn_gate;      // [n, heads * head_dim] their gate half
  DeviceBuffer gate_idx;       // [2 * n * heads] int32 gather lists splitting q and gate
  // Gated DeltaNet (deltanet_forward.cc).
  DeviceBuffer dn_in, dn_ba, dn_qkv, dn_conv, dn_z, dn_bab, dn_g, dn_beta, dn_out, dn_idx;
  DeviceBuffer expert_rot[2];  // [the same rows, in] grouped experts' inputs under a rotation
  // Multi-head latent attention (forward.cc: the staging buffer, the query latent of q_a and
  // the gather lists).
  DeviceBuffer mla_buf, mla_qa, mla_idx;
  // Layers narrower than the cache's head_dim (gemma4 sliding layers): [q | k | v | zeros] at
  // their own head size, padded into q/k/v and the output compacted back (pad_idx lists).
  DeviceBuffer pad_buf, pad_idx;
  // Per-layer input embeddings (gemma4): [n, layers, d] inputs, the gathered layer's [n, d]
  // slice, the gate [n, d], and the row lists picking layer l's slice.
  DeviceBuffer ple_in, ple_tmp, ple_slice, ple_gate, ple_idx;
  // The expert cache's prefetch prediction (moe_forward.cc).
  DeviceBuffer predict_h;       // [n, hidden]
  DeviceBuffer predict_probs;   // [n, next layer's experts]
  DeviceBuffer predict_chosen;  // [n, top_k] int32
  DeviceBuffer predict_weight;  // [n, top_k]

  // Host side.
  std::vector<int64_t> positions_host;                    // [n]
  std::vector<int64_t> logit_rows_host;                   // rows whose logits are wanted
  std::vector<int32_t> logit_rows32;                      // the same as int32 (GatherRows)
  std::vector<int32_t> chosen_host;                       // [n, top_k]
  std::vector<float> chosen_weight_host;                  // [n, top_k]
  std::vector<int64_t> expert_count, expert_begin;        // [experts]
  std::vector<int32_t> slot_row_host;                     // [n * top_k]
  std::vector<float> slot_weight_host;                    // [n * top_k]
  std::vector<float> router_logits_host;                  // [n, experts] (host-routed rules)
  std::vector<int32_t> gate_idx_host;                     // [2 * n * heads]
  std::vector<int32_t> pad_idx_host, ple_idx_host;        // gemma4 gather lists of the step
  std::vector<float> pad_zero_host;                       // one zero chunk (gemma4 padding)
  std::vector<int32_t> dn_idx_host;                       // DeltaNet gather lists of the step
  std::vector<int32_t> mla_idx_host;                      // MLA gather lists of the step
  std::vector<int32_t> predicted_host;                    // the next MoE layer's predicted experts
  std::vector<int64_t> predict_count;                     // [experts]
  std::vector<int32_t> used_host;                         // this MoE layer's experts with rows
  std::vector<kernels::GroupedMatMulItem> grouped_items;  // one GroupedMatMul's matmuls
  std::vector<kernels::MatMulOutput> grouped_outs;        // their dense outputs

  // Grows a buffer to at least `count` elements of T (contents are not kept).
  template <typename T = float>
  static T* Need(kernels::Backend& be, DeviceBuffer& b, int64_t count, std::string_view what) {
    const size_t bytes = size_t(count) * sizeof(T);
    if (b.bytes() < bytes) {
      b.Reset();
      b = be.Allocate(bytes, what);
    }
    return b.as<T>();
  }
  // `host` as the backend sees it: host backends use the host array itself; device backends get
  // a copy in `b` (queued; the host array stays unchanged until the next sync).
  template <typename T>
  static const T* Stage(kernels::Backend& be, DeviceBuffer& b, const T* host, int64_t count,
                        std::string_view what) {
    if (be.memory_space() == MemorySpace::kHost) return host;
    T* d = Need<T>(be, b, count, what);
    be.CopyToDevice(d, host, size_t(count) * sizeof(T));
    return d;
  }
};

}  // namespace tq
