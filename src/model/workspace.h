// Activation buffers of the forward pass, grown to the largest batch seen and then reused (no
// allocation per token). Internal to model/.
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"

namespace tq {

struct ForwardWorkspace {
  AlignedBuffer<float> x;           // [n, hidden] residual stream
  AlignedBuffer<float> h;           // [n, hidden] normed input of a block
  AlignedBuffer<float> y;           // [n, hidden] block output
  AlignedBuffer<float> q;           // [n, heads * head_dim]
  AlignedBuffer<float> k, v;        // [n, kv_heads * head_dim]
  AlignedBuffer<float> attn;        // [n, heads * head_dim]
  AlignedBuffer<float> gate, up;    // [n, ffn]
  std::vector<int64_t> positions;   // [n]
  std::vector<int64_t> logit_rows;  // rows whose logits are wanted
  // MoE routing.
  AlignedBuffer<float> router_probs;                // [n, experts]
  std::vector<int32_t> chosen;                      // [n, top_k] expert ids
  std::vector<float> chosen_weight;                 // [n, top_k]
  std::vector<int64_t> expert_count, expert_begin;  // [experts]
  std::vector<int64_t> slot_row;                    // [n * top_k] rows grouped by expert
  std::vector<float> slot_weight;                   // [n * top_k]

  // Grows a buffer to at least `count` floats.
  static float* Need(AlignedBuffer<float>& b, int64_t count) {
    if (b.size() < size_t(count)) b.resize(size_t(count));
    return b.data();
  }
};

}  // namespace tq
