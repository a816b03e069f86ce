// GPT-OSS: biased attention with a learned sink logit per head, alternating sliding window,
// YaRN RoPE; MoE with a biased router (softmax over the top-k logits) and experts stored as
// [E, ...] tensors with biases, clamped SwiGLU (gate·sigmoid(1.702·gate)·(up + 1)).
#include "model/architecture.h"

namespace tq {

const Architecture& GptOssArchitecture() {
  static const Architecture arch = [] {
    Architecture a;
    a.model_type = "gpt_oss";
    a.sliding_window = true;
    a.moe = true;
    a.attn_sinks = true;
    a.router_bias = true;
    a.fused_experts = true;
    a.activation = "gpt_oss_swiglu";
    a.names.router = "model.layers.{L}.mlp.router";
    return a;
  }();
  return arch;
}

}  // namespace tq
