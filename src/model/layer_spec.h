// The per-layer specification of a decoder (in the spirit of gemma.cpp's LayerConfig): plain data
// built once from config.json and the family's Architecture. Weights, tensor roles (what convert
// quantizes), plan's memory model, synth and the forward pass all read this; nothing after
// BuildModelSpec needs to know a family by name.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace tq {

struct Architecture;

// What mixes information across positions in a layer.
enum class MixerKind : uint8_t {
  kNone,           // nemotron_h MLP / MoE layers: no mixer
  kAttention,      // softmax attention (full or sliding window) over a KV cache
  kMla,            // multi-head latent attention over a compressed latent cache (deepseek)
  kGatedDeltaNet,  // linear attention with a [k_dim, v_dim] state per head (qwen3_next, 3.5)
  kMamba2,         // selective state space (SSD) with a [head_dim, N] state per head
};

enum class FfnKind : uint8_t { kNone, kDense, kMoe };

// The FFN nonlinearity. Gated ones compute act(gate) · up; kRelu2 is ungated (up -> relu² ->
// down); kClampedSwiglu is GPT-OSS's: g = min(gate, 7), u = clamp(up, ±7),
// g · sigmoid(1.702 g) · (u + 1).
enum class Activation : uint8_t { kSilu, kGeluTanh, kRelu2, kClampedSwiglu };

// How the MoE router turns logits into the top-k experts and their weights.
enum class Router : uint8_t {
  kSoftmaxTopK,       // softmax over all experts, top-k (qwen, deepseek_v2)
  kTopKSoftmax,       // top-k logits, softmax over those (mixtral, gpt_oss)
  kSigmoidGroupTopK,  // sigmoid; top-k of (score + correction bias) within the best groups
};

// One RoPE table. Pairs follow rotate_half (i, i + rotary_dim/2) unless interleaved (2i, 2i+1);
// the first rotary_dim of head_dim rotate, the rest pass through.
struct RopeSpec {
  double theta = 10000.0;
  RopeScaling scaling;
  int64_t rotary_dim = 0;  // even, <= head_dim
  int64_t freq_dim = 0;    // the d of theta^(-2i/d): rotary_dim, or head_dim (proportional)
  bool interleaved = false;
};

struct AttentionSpec {
  int64_t num_heads = 0, num_kv_heads = 0;
  int64_t head_dim = 0;      // of q and k (MLA: nope + rope)
  int64_t v_head_dim = 0;    // of v and the output per head
  int64_t window = 0;        // sliding window (0 = full attention)
  float scale = 1.0f;        // of q·k
  float logit_softcap = 0;   // scores -> softcap · tanh(scores / softcap) (0 = none)
  bool sinks = false;        // per-head sink logit joins the softmax denominator
  bool qk_norm = false;      // RMSNorm over head_dim on q and k before RoPE
  bool v_norm = false;       // unweighted RMSNorm over head_dim on v
  bool output_gate = false;  // q_proj rows are [q | gate] per head; out ×= sigmoid(gate)
  bool qkv_bias = false, o_bias = false;
  bool fused_qkv = false;  // one [q; k; v] projection
  // Whether the TurboQuant KV codec may compress this layer's cache (full attention only;
  // sliding-window layers keep their window in fp16).
  bool kv_compressible = true;
  RopeSpec rope;
};

struct MlaSpec {
  int64_t q_lora_rank = 0;  // 0: one full-rank q projection
  int64_t kv_lora_rank = 0;
  int64_t nope_dim = 0, rope_dim = 0, v_dim = 0;  // per head
  // Per-token cache width of the weight-absorbed form: kv_lora_rank + rope_dim.
  int64_t LatentWidth() const { return kv_lora_rank + rope_dim; }
};

struct DeltaNetSpec {
  int64_t num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int64_t conv_kernel = 4;
  bool fused_in_proj = false;  // qwen3_next: qkvz / ba interleaved per key-head group
  int64_t KeyDim() const { return num_k_heads * k_dim; }
  int64_t ValueDim() const { return num_v_heads * v_dim; }
  int64_t ConvDim() const { return 2 * KeyDim() + ValueDim(); }  // channels of [q | k | v]
  // The recurrent state per sequence: conv history + [v_heads, k_dim, v_dim] fp32.
  int64_t StateFloats() const {
    return ConvDim() * (conv_kernel - 1) + num_v_heads * k_dim * v_dim;
  }
};

struct Mamba2Spec {
  int64_t num_heads = 0, head_dim = 0, state_size = 0, n_groups = 1;
  int64_t conv_kernel = 4, chunk_size = 256;
  bool conv_bias = true, proj_bias = false;
  float dt_min = 0, dt_max = 1e30f;  // time_step_limit clamp of softplus(dt + dt_bias)
  float norm_eps = 1e-5f;
  int64_t Inner() const { return num_heads * head_dim; }
  int64_t ConvDim() const { return Inner() + 2 * n_groups * state_size; }  // [x | B | C]
  int64_t InProjRows() const { return Inner() + ConvDim() + num_heads; }   // [z | xBC | dt]
  int64_t StateFloats() const {
    return ConvDim() * (conv_kernel - 1) + num_heads * head_dim * state_size;
  }
};

struct MoeSpec {
  int64_t num_experts = 0, top_k = 0, expert_ffn = 0;
  Router router = Router::kSoftmaxTopK;
  bool renormalize = false;             // divide the chosen weights by their sum
  float routed_scale = 1.0f;            // routed output × this (deepseek)
  int64_t n_group = 1, topk_group = 1;  // kSigmoidGroupTopK
  bool correction_bias = false;         // e_score_correction_bias [E] (selection only)
  bool router_bias = false;             // gpt_oss
  bool expert_bias = false;             // gpt_oss
  bool fused_experts = false;           // gpt_oss [E, ...] tensors
  int64_t shared_ffn = 0;               // shared expert width (0 = none)
  bool shared_gate = false;             // shared output × sigmoid(x · w) (qwen2_moe, qwen3_next)
};

struct FfnSpec {
  FfnKind kind = FfnKind::kDense;
  Activation act = Activation::kSilu;
  int64_t ffn = 0;  // dense width
  bool bias = false;
  bool fused_gate_up = false;  // phi3
  MoeSpec moe;
  bool gated() const { return act != Activation::kRelu2; }
};

struct LayerSpec {
  int64_t index = 0;
  MixerKind mixer = MixerKind::kAttention;
  AttentionSpec attn;  // kAttention (and kMla: heads, scale, rope)
  MlaSpec mla;         // kMla
  DeltaNetSpec delta;  // kGatedDeltaNet
  Mamba2Spec mamba;    // kMamba2
  FfnSpec ffn;
  bool sandwich_norm = false;    // post-mixer and post-FFN norms before the residual adds
  bool per_layer_input = false;  // gemma4: per-layer input embedding gate + layer_scalar

  bool HasKvCache() const { return mixer == MixerKind::kAttention || mixer == MixerKind::kMla; }
  bool HasRecurrentState() const {
    return mixer == MixerKind::kGatedDeltaNet || mixer == MixerKind::kMamba2;
  }
  // Floats of fixed-size per-sequence state (0 for attention layers).
  int64_t RecurrentStateFloats() const;
};

struct ModelSpec {
  std::string model_type;
  int64_t hidden = 0, vocab = 0;
  float norm_eps = 1e-6f;
  bool norm_plus_one = false;  // RMSNorm × (1 + w)
  float embed_scale = 1.0f;    // gemma: sqrt(hidden)
  float final_logit_softcap = 0;
  bool tied_embeddings = false;
  int64_t per_layer_input_dim = 0, per_layer_vocab = 0;  // gemma4
  std::vector<LayerSpec> layers;

  int64_t CountMixer(MixerKind k) const;
  bool HasRecurrentLayers() const;
};

// The attention geometry of the KV cache (every layer with a KV cache has the same mixer and
// head counts: LoadWeights checks): query heads, kv heads and head size. MLA layers cache the
// expanded keys (nope + rope per head) and their values zero-padded to the same size. A model
// without attention layers gets a placeholder geometry (1, 1, 2) for a cache of 0 KV layers.
struct CacheGeometry {
  int64_t heads = 1, kv_heads = 1, head_dim = 2;
};
// Layers of different head sizes (gemma4: global layers wider) share the widest; the narrower
// ones are zero-padded into it (exact: zeros add nothing to q·k, and their padded outputs are
// dropped). MLA layers cache the latent: one KV head of kv_lora + rope channels that every
// query head attends to (keys [c_kv | k_pe], values [c_kv | 0]; model/mla_absorb.h).
inline CacheGeometry CacheGeometryOf(const ModelSpec& s) {
  CacheGeometry g;
  bool found = false;
  for (const LayerSpec& L : s.layers) {
    if (L.mixer == MixerKind::kMla) return {L.attn.num_heads, 1, L.mla.LatentWidth()};
    if (L.mixer != MixerKind::kAttention) continue;
    if (!found) g = {L.attn.num_heads, L.attn.num_kv_heads, L.attn.head_dim};
    g.head_dim = std::max(g.head_dim, L.attn.head_dim);
    found = true;
  }
  return g;
}

// The KV cache layout of a model of this spec (kv/kv_cache.h): its attention layers (windows,
// scale, soft-cap; no sinks) and the state sizes of its recurrent layers.
struct KvLayout;
KvLayout KvLayoutOf(const ModelSpec& spec);

// The spec for `config` as `arch` builds it. Throws tq::Error("[layer spec] ...") for settings
// it cannot express (an unknown activation, a rotary dimension that is odd or exceeds head_dim).
ModelSpec BuildModelSpec(const ModelConfig& config, const Architecture& arch);
// The same through FindFamily(config.model_type).
ModelSpec BuildModelSpec(const ModelConfig& config);

const char* MixerKindName(MixerKind k);    // "none", "attention", "mla", "gated_deltanet", "mamba2"
const char* ActivationName(Activation a);  // "silu", "gelu_tanh", "relu2", "clamped_swiglu"
const char* RouterName(Router r);          // "softmax_topk", "topk_softmax", "sigmoid_group_topk"

}  // namespace tq
