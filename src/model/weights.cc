#include "model/weights.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/architecture.h"
#include "model/mla_absorb.h"
#include "model/packed_linear.h"
#include "model/transpose_copy.h"

namespace tq {
namespace {

GatedMlp LoadMlp(const Checkpoint& ckpt, const std::string& gate, const std::string& up,
                 const std::string& down, int64_t hidden, int64_t ffn, bool bias,
                 PackedCheckpointInfo* packed) {
  GatedMlp m;
  m.gate = LoadLinear(ckpt, gate, ffn, hidden, bias, packed);
  m.up = LoadLinear(ckpt, up, ffn, hidden, bias, packed);
  m.down = LoadLinear(ckpt, down, hidden, ffn, bias, packed);
  return m;
}

// The module prefix of a tensor name ("model.embed_tokens.weight" -> "model.embed_tokens").
std::string ModulePrefix(const std::string& name) {
  const std::string suffix = ".weight";
  return name.size() > suffix.size() && name.ends_with(suffix)
             ? name.substr(0, name.size() - suffix.size())
             : name;
}

// GPT-OSS's experts of one layer, stored as [E, hidden, 2 * ffn] (gate and up interleaved along
// the last axis: gate = [..., 0::2], up = [..., 1::2]) and [E, ffn, hidden], with biases
// "<name>_bias" [E, 2 * ffn] and [E, hidden] (y = x · W + b): rearranged into per-expert [out, in]
// matrices in the checkpoint's dtype, owned by `w`.
void LoadFusedExperts(const Checkpoint& ckpt, const std::string& gate_up_name,
                      const std::string& down_name, int64_t experts, int64_t hidden, int64_t ffn,
                      ModelWeights& w, std::vector<GatedMlp>& out) {
  const std::string where = "checkpoint " + ckpt.dir();
  const TensorView gu = ckpt.View(gate_up_name), dn = ckpt.View(down_name);
  TQ_CHECK(gu.rank() == 3 && gu.dim(0) == experts && gu.dim(1) == hidden && gu.dim(2) == 2 * ffn,
           where, "tensor '{}' has shape {}, expected [{}, {}, {}]", gate_up_name,
           ShapeToString(gu.shape), experts, hidden, 2 * ffn);
  TQ_CHECK(dn.rank() == 3 && dn.dim(0) == experts && dn.dim(1) == ffn && dn.dim(2) == hidden, where,
           "tensor '{}' has shape {}, expected [{}, {}, {}]", down_name, ShapeToString(dn.shape),
           experts, ffn, hidden);
  for (const TensorView* t : {&gu, &dn})
    TQ_CHECK(t->dtype == DType::F32 || t->dtype == DType::F16 || t->dtype == DType::BF16, where,
             "fused expert tensors must be F32/F16/BF16, got {}", DTypeName(t->dtype));
  const std::vector<float> gub = [&] {
    const TensorView b = ckpt.View(gate_up_name + "_bias");
    TQ_CHECK(b.rank() == 2 && b.dim(0) == experts && b.dim(1) == 2 * ffn, where,
             "tensor '{}_bias' has shape {}, expected [{}, {}]", gate_up_name,
             ShapeToString(b.shape), experts, 2 * ffn);
    std::vector<float> v(size_t(b.numel()));
    ToF32(b, v.data());
    return v;
  }();
  const std::vector<float> db = [&] {
    const TensorView b = ckpt.View(down_name + "_bias");
    TQ_CHECK(b.rank() == 2 && b.dim(0) == experts && b.dim(1) == hidden, where,
             "tensor '{}_bias' has shape {}, expected [{}, {}]", down_name, ShapeToString(b.shape),
             experts, hidden);
    std::vector<float> v(size_t(b.numel()));
    ToF32(b, v.data());
    return v;
  }();
  // dst[o, i] = src[e, i, o * step + offset]: a transposed (and strided) copy.
  auto rearrange = [&](const TensorView& src, int64_t e, int64_t rows, int64_t cols, int64_t stride,
                       int64_t step, int64_t offset) {
    const size_t es = DTypeSize(src.dtype);
    std::vector<uint8_t>& dst = w.owned.emplace_back(size_t(rows * cols) * es);
    TransposeCopy(src.bytes() + size_t(e * cols * stride) * es, stride, step, offset, rows, cols,
                  es, dst.data());
    TensorView v;
    v.data = dst.data();
    v.dtype = src.dtype;
    v.shape = {rows, cols};
    return v;
  };
  for (int64_t e = 0; e < experts; ++e) {
    GatedMlp m;
    std::vector<float> bg(static_cast<size_t>(ffn)), bu(static_cast<size_t>(ffn));
    for (int64_t f = 0; f < ffn; ++f) {
      bg[size_t(f)] = gub[size_t(e * 2 * ffn + 2 * f)];
      bu[size_t(f)] = gub[size_t(e * 2 * ffn + 2 * f + 1)];
    }
    m.gate = std::make_unique<DenseLinear>(rearrange(gu, e, ffn, hidden, 2 * ffn, 2, 0), bg);
    m.up = std::make_unique<DenseLinear>(rearrange(gu, e, ffn, hidden, 2 * ffn, 2, 1), bu);
    m.down = std::make_unique<DenseLinear>(
        rearrange(dn, e, hidden, ffn, hidden, 1, 0),
        std::vector<float>(db.begin() + e * hidden, db.begin() + (e + 1) * hidden));
    out.push_back(std::move(m));
  }
}

// Hub layouts that convert decodes (model/source_tensors.h) are not read at load: dequantizing
// them would hold the whole model in bf16/fp32 (gpt-oss-120b's MXFP4 experts: 4x their bytes).
void RefuseHubQuantized(const Checkpoint& ckpt) {
  for (const std::string& n : ckpt.Names()) {
    const TensorInfo& t = ckpt.Info(n);
    const char* layout = nullptr;
    if (t.dtype == DType::F8_E4M3) {
      layout = "FP8 (E4M3, block scales '<name>_scale_inv')";
    } else if (n.ends_with("_blocks") && ckpt.Has(n.substr(0, n.size() - 7) + "_scales")) {
      layout = "MXFP4 (e2m1 blocks with e8m0 '_scales')";
    }
    if (layout)
      Fail("checkpoint " + ckpt.dir(),
           "tensor '{}' is stored as {}, which is read only by convert: convert the checkpoint "
           "first (turboquant convert --model {} --out OUT --bits 4) and run OUT",
           n, layout, ckpt.dir());
  }
}

// A float tensor of exactly `shape` as an fp32 vector (conv weights, state-space constants).
std::vector<float> LoadFloats(const Checkpoint& ckpt, const std::string& name, const Shape& shape) {
  const TensorView t = ckpt.View(name);
  TQ_CHECK(t.shape == shape && IsFloat(t.dtype), "checkpoint " + ckpt.dir(),
           "tensor '{}' is {} {}, expected a float tensor {}", name, DTypeName(t.dtype),
           ShapeToString(t.shape), ShapeToString(shape));
  std::vector<float> v(size_t(t.numel()));
  ToF32(t, v.data());
  return v;
}

// A Gated DeltaNet mixer's weights (layer_spec.h DeltaNetSpec; tensor names from the
// architecture). The gated norm's weight is applied as stored: it is not a (1 + w) norm.
void LoadDeltaNet(const Checkpoint& ckpt, const ArchTensorNames& nm, const LayerSpec& S,
                  int64_t hidden, PackedCheckpointInfo* packed, LayerWeights& L) {
  const DeltaNetSpec& d = S.delta;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, S.index); };
  TQ_CHECK(d.num_k_heads > 0 && d.num_v_heads % d.num_k_heads == 0 && d.k_dim > 0 && d.v_dim > 0 &&
               d.conv_kernel >= 1,
           "checkpoint " + ckpt.dir(),
           "layer {}: linear attention with {} key heads, {} value heads, dims {} / {}, conv {} "
           "(value heads must be a multiple of key heads)",
           S.index, d.num_k_heads, d.num_v_heads, d.k_dim, d.v_dim, d.conv_kernel);
  const int64_t K = d.KeyDim(), V = d.ValueDim(), Hv = d.num_v_heads;
  if (d.fused_in_proj) {
    L.dn_qkvz = LoadLinear(ckpt, name(nm.dn_qkvz), 2 * K + 2 * V, hidden, false, packed);
    L.dn_ba = LoadLinear(ckpt, name(nm.dn_ba), 2 * Hv, hidden, false, packed);
  } else {
    L.dn_qkv = LoadLinear(ckpt, name(nm.dn_qkv), d.ConvDim(), hidden, false, packed);
    L.dn_z = LoadLinear(ckpt, name(nm.dn_z), V, hidden, false, packed);
    L.dn_b = LoadLinear(ckpt, name(nm.dn_b), Hv, hidden, false, packed);
    L.dn_a = LoadLinear(ckpt, name(nm.dn_a), Hv, hidden, false, packed);
  }
  L.dn_conv = LoadFloats(ckpt, name(nm.dn_conv) + ".weight", {d.ConvDim(), 1, d.conv_kernel});
  L.dn_a_log = LoadVector(ckpt, name(nm.dn_a_log), Hv);
  L.dn_dt_bias = LoadVector(ckpt, name(nm.dn_dt_bias), Hv);
  L.dn_norm = LoadVector(ckpt, name(nm.dn_norm), d.v_dim);
  L.dn_out = LoadLinear(ckpt, name(nm.dn_out), hidden, V, false, packed);
}

// A Mamba-2 mixer's weights: in_proj loads as its three row blocks (z, xBC, dt), so each
// projection lands dense (packed checkpoints slice their rows the same way).
void LoadMamba2(const Checkpoint& ckpt, const ArchTensorNames& nm, const LayerSpec& S,
                int64_t hidden, PackedCheckpointInfo* packed, LayerWeights& L) {
  const Mamba2Spec& m = S.mamba;
  auto name = [&](const std::string& pattern) { return TensorName(pattern, S.index); };
  TQ_CHECK(m.num_heads > 0 && m.head_dim > 0 && m.state_size > 0 && m.n_groups > 0 &&
               m.num_heads % m.n_groups == 0 && m.Inner() % m.n_groups == 0 && m.conv_kernel >= 1,
           "checkpoint " + ckpt.dir(),
           "layer {}: Mamba-2 with {} heads of {}, state {}, {} groups, conv {} (heads must be a "
           "multiple of groups)",
           S.index, m.num_heads, m.head_dim, m.state_size, m.n_groups, m.conv_kernel);
  const int64_t I = m.Inner(), C = m.ConvDim(), H = m.num_heads, rows = m.InProjRows();
  const std::string in = name(nm.ssm_in);
  L.ssm_z = LoadLinearRows(ckpt, in, rows, 0, I, hidden, m.proj_bias, packed);
  L.ssm_xbc = LoadLinearRows(ckpt, in, rows, I, C, hidden, m.proj_bias, packed);
  L.ssm_dt = LoadLinearRows(ckpt, in, rows, I + C, H, hidden, m.proj_bias, packed);
  L.ssm_conv = LoadFloats(ckpt, name(nm.ssm_conv) + ".weight", {C, 1, m.conv_kernel});
  if (m.conv_bias) L.ssm_conv_bias = LoadVector(ckpt, name(nm.ssm_conv) + ".bias", C);
  std::vector<float> a = LoadVector(ckpt, name(nm.ssm_a_log), H);
  for (float& v : a) v = -std::exp(v);
  L.ssm_a = FloatParam(std::move(a));
  L.ssm_d = LoadVector(ckpt, name(nm.ssm_d), H);
  L.ssm_dt_bias = LoadVector(ckpt, name(nm.ssm_dt_bias), H);
  L.ssm_norm = LoadVector(ckpt, name(nm.ssm_norm), I);
  L.ssm_out = LoadLinear(ckpt, name(nm.ssm_out), hidden, I, m.proj_bias, packed);
}

}  // namespace

ModelWeights::ModelWeights() = default;
ModelWeights::~ModelWeights() = default;

std::unique_ptr<ModelWeights> LoadWeights(const Checkpoint& ckpt, const ModelConfig& c,
                                          const Architecture& arch) {
  const ArchTensorNames& nm = arch.names;
  const std::string where = "checkpoint " + ckpt.dir();
  const int64_t hidden = c.hidden_size;
  auto w = std::make_unique<ModelWeights>();
  RefuseHubQuantized(ckpt);

  // A TurboQuant checkpoint: config.json's quantization block (rotation groups, format version).
  std::optional<PackedCheckpointInfo> packed_info =
      ParseQuantizationBlock(c.raw_json, where + "/config.json");
  PackedCheckpointInfo* packed = packed_info ? &*packed_info : nullptr;
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in, bool bias) {
    return LoadLinear(ckpt, prefix, out, in, bias, packed);
  };
  const std::string embed_prefix = ModulePrefix(nm.embed);
  // Tied when the config says so or when there is no separate head (Hugging Face does the same).
  w->lm_head_tied = c.tie_word_embeddings ||
                    (!ckpt.Has(nm.lm_head + ".weight") && !ckpt.Has(nm.lm_head + ".codes"));
  if (!ckpt.Has(nm.embed) && ckpt.Has(embed_prefix + ".codes")) {
    TQ_CHECK(packed != nullptr, where,
             "'{}.codes' is a TurboQuant packed tensor but config.json has no quantization block",
             embed_prefix);
    // Quantized lookup table: rows are dequantized per token; never rotated.
    w->embed_packed = LoadPackedLinear(ckpt, *packed, embed_prefix, c.vocab_size, hidden, false);
    TQ_CHECK(w->embed_packed->rotation() == nullptr, where,
             "'{}' is a lookup table and must not be rotated", embed_prefix);
    w->lm_head = w->lm_head_tied
                     ? LoadPackedLinear(ckpt, *packed, embed_prefix, c.vocab_size, hidden, false)
                     : linear(nm.lm_head, c.vocab_size, hidden, false);
  } else {
    w->embed = ckpt.View(nm.embed);
    TQ_CHECK(w->embed.rank() == 2 && w->embed.dim(0) == c.vocab_size && w->embed.dim(1) == hidden &&
                 IsFloat(w->embed.dtype) && w->embed.dtype != DType::F64,
             where, "tensor '{}' is {} {}, expected F32/F16/BF16 [{}, {}]", nm.embed,
             DTypeName(w->embed.dtype), ShapeToString(w->embed.shape), c.vocab_size, hidden);
    w->lm_head = w->lm_head_tied ? std::make_unique<DenseLinear>(w->embed)
                                 : linear(nm.lm_head, c.vocab_size, hidden, false);
  }
  w->spec = BuildModelSpec(c, arch);
  const ModelSpec& spec = w->spec;
  // RMSNorm × (1 + w) (gemma): the weights are stored as w, the forward pass multiplies by
  // the loaded vector, so 1 is added here once.
  auto norm = [&](const std::string& tensor, int64_t size) {
    std::vector<float> v = LoadVector(ckpt, tensor, size);
    if (spec.norm_plus_one)
      for (float& x : v) x += 1.0f;
    return FloatParam(std::move(v));
  };
  w->final_norm = norm(nm.final_norm, hidden);
  if (spec.per_layer_input_dim > 0) {  // gemma4's per-layer input embeddings
    const int64_t width = c.num_layers * spec.per_layer_input_dim;
    w->ple_embed = ckpt.View(nm.ple_embed);
    TQ_CHECK(w->ple_embed.rank() == 2 && w->ple_embed.dim(0) == spec.per_layer_vocab &&
                 w->ple_embed.dim(1) == width && IsFloat(w->ple_embed.dtype) &&
                 w->ple_embed.dtype != DType::F64,
             where, "tensor '{}' is {} {}, expected F32/F16/BF16 [{}, {}]", nm.ple_embed,
             DTypeName(w->ple_embed.dtype), ShapeToString(w->ple_embed.shape), spec.per_layer_vocab,
             width);
    w->ple_model_proj = linear(nm.ple_model_proj, width, hidden, false);
    w->ple_proj_norm = norm(nm.ple_proj_norm, spec.per_layer_input_dim);
  }
  w->rope = ComputeRopeFrequencies(c, c.head_dim);

  // The first layer with a KV cache sets the cache geometry the others must share.
  const LayerSpec* kv0 = nullptr;
  for (const LayerSpec& S : spec.layers)
    if (S.HasKvCache() && !kv0) kv0 = &S;
  int64_t kv_layers = 0, state_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
    const LayerSpec& S = spec.layers[size_t(l)];
    const AttentionSpec& A = S.attn;
    if (S.HasKvCache()) {
      const AttentionSpec& A0 = kv0->attn;
      // Layers may differ in head size (gemma4): narrower ones are zero-padded to the cache's
      // head_dim, exact because the scale is the model's, not 1/sqrt(head_dim) of the cache.
      const bool same_dim = A.head_dim == A0.head_dim;
      TQ_CHECK(S.mixer == kv0->mixer && A.scale == A0.scale &&
                   A.logit_softcap == A0.logit_softcap &&
                   (same_dim || (S.mixer == MixerKind::kAttention && A.v_head_dim == A.head_dim &&
                                 !A.output_gate && A.num_heads == A0.num_heads &&
                                 A.num_kv_heads == A0.num_kv_heads)),
               where,
               "{} layer {}: a per-layer attention kind, head count, attention scale or soft-cap "
               "does not run yet",
               c.model_type, l);
    }
    LayerWeights& L = w->layers.emplace_back();
    if (S.HasKvCache()) L.kv_index = kv_layers++;
    if (S.HasRecurrentState()) L.state_index = state_layers++;
    L.attn_norm = norm(name(nm.attn_norm), hidden);
    L.ffn_norm = norm(name(nm.ffn_norm), hidden);
    if (S.sandwich_norm) {
      L.post_attn_norm = norm(name(nm.post_attn_norm), hidden);
      L.post_ffn_norm = norm(name(nm.post_ffn_norm), hidden);
    }
    if (S.mixer == MixerKind::kMla) {
      const MlaSpec& M = S.mla;
      const int64_t H = A.num_heads, qk = M.nope_dim + M.rope_dim;
      TQ_CHECK(!A.qkv_bias && !A.o_bias, where, "{} layer {}: MLA with biases does not run yet",
               c.model_type, l);
      if (M.q_lora_rank > 0) {
        L.mla_q_a = linear(name(nm.mla_q_a), M.q_lora_rank, hidden, false);
        L.mla_q_a_norm = norm(name(nm.mla_q_a_norm), M.q_lora_rank);
        L.mla_q_b = linear(name(nm.mla_q_b), H * qk, M.q_lora_rank, false);
      } else {
        L.q = linear(name(nm.q), H * qk, hidden, false);
      }
      const std::string kv_a = name(nm.mla_kv_a);
      const int64_t kv_a_rows = M.kv_lora_rank + M.rope_dim;
      L.mla_kv_a_c =
          LoadLinearRows(ckpt, kv_a, kv_a_rows, 0, M.kv_lora_rank, hidden, false, packed);
      L.mla_kv_a_pe =
          LoadLinearRows(ckpt, kv_a, kv_a_rows, M.kv_lora_rank, M.rope_dim, hidden, false, packed);
      L.mla_kv_a_norm = norm(name(nm.mla_kv_a_norm), M.kv_lora_rank);
      L.mla_kv_b = linear(name(nm.mla_kv_b), H * (M.nope_dim + M.v_dim), M.kv_lora_rank, false);
      MlaAbsorbed absorbed = AbsorbKvB(*L.mla_kv_b, M, H);
      L.mla_uk_t = std::move(absorbed.uk_t);
      L.mla_uv = std::move(absorbed.uv);
      L.o = linear(name(nm.o), hidden, H * M.v_dim, false);
    } else if (S.mixer == MixerKind::kGatedDeltaNet) {
      LoadDeltaNet(ckpt, nm, S, hidden, packed, L);
    } else if (S.mixer == MixerKind::kMamba2) {
      LoadMamba2(ckpt, nm, S, hidden, packed, L);
    } else if (S.mixer == MixerKind::kNone) {
      // an FFN-only layer (nemotron_h): its one norm is attn_norm = ffn_norm
    } else {
      TQ_CHECK(S.mixer == MixerKind::kAttention && A.v_head_dim == A.head_dim, where,
               "{} layer {}: this layer kind ({} mixer, v_head_dim {} != head_dim {}) does not run "
               "yet",
               c.model_type, l, MixerKindName(S.mixer), A.v_head_dim, A.head_dim);
      const int64_t hd = A.head_dim;  // the layer's (gemma4's global layers are wider)
      const int64_t qdim = A.num_heads * hd, kvdim = A.num_kv_heads * hd;
      const int64_t q_rows = A.output_gate ? 2 * qdim : qdim;  // [q | gate] per head
      if (A.fused_qkv) {
        const std::string qkv = name(nm.qkv);
        const int64_t rows = qdim + 2 * kvdim;
        L.q = LoadLinearRows(ckpt, qkv, rows, 0, qdim, hidden, A.qkv_bias, packed);
        L.k = LoadLinearRows(ckpt, qkv, rows, qdim, kvdim, hidden, A.qkv_bias, packed);
        L.v = LoadLinearRows(ckpt, qkv, rows, qdim + kvdim, kvdim, hidden, A.qkv_bias, packed);
      } else {
        L.q = linear(name(nm.q), q_rows, hidden, A.qkv_bias);
        L.k = linear(name(nm.k), kvdim, hidden, A.qkv_bias);
        L.v = linear(name(nm.v), kvdim, hidden, A.qkv_bias);
      }
      L.o = linear(name(nm.o), hidden, qdim, A.o_bias);
      if (A.qk_norm) {
        L.q_norm = norm(name(nm.q_norm), hd);
        L.k_norm = norm(name(nm.k_norm), hd);
      }
      if (A.sinks) L.sinks = LoadVector(ckpt, name(nm.sinks), A.num_heads);
      if (A.v_norm) L.v_norm = FloatParam(std::vector<float>(size_t(hd), 1.0f));
    }
    if (S.per_layer_input) {
      const int64_t d = spec.per_layer_input_dim;
      L.ple_gate = linear(name(nm.ple_gate), d, hidden, false);
      L.ple_proj = linear(name(nm.ple_proj), hidden, d, false);
      L.ple_post_norm = norm(name(nm.ple_post_norm), hidden);
      L.layer_scalar = LoadVector(ckpt, name(nm.layer_scalar), 1)[0];
    }
    L.window = A.window;
    if (S.HasKvCache() && A.rope.rotary_dim > 0) {
      // The layer's RoPE table: config's with the layer's base and scaling (gemma3 local layers).
      ModelConfig rc = c;
      rc.rope_theta = A.rope.theta;
      rc.rope_scaling = A.rope.scaling;
      RopeFrequencies rf = ComputeRopeFrequencies(rc, A.rope.freq_dim);
      if (A.rope.freq_dim != A.rope.rotary_dim) {
        // Proportional (gemma4 global layers): the first rotary_dim / 2 frequencies of the
        // whole head, then zero ones, over rotate_half pairs (i, i + head_dim / 2): pairs past
        // rotary_dim / 2 do not turn (HF's inv_freq of nope angles 0).
        rf.inv_freq.resize(size_t(A.rope.rotary_dim / 2));
        rf.inv_freq.resize(size_t(A.rope.freq_dim / 2), 0.0f);
      }
      L.rope_inv_freq = FloatParam(rf.inv_freq);
      L.rope_attention_factor = rf.attention_factor;
    }
    const FfnSpec& F = S.ffn;
    if (F.kind == FfnKind::kMoe) {
      const MoeSpec& M = F.moe;
      TQ_CHECK(M.top_k > 0 && M.top_k <= M.num_experts, where,
               "num_experts_per_tok = {} with {} experts", M.top_k, M.num_experts);
      // Softmax over the top-k logits = softmax over all, top-k, renormalised (mixtral).
      const bool softmax = M.router == Router::kSoftmaxTopK || M.router == Router::kTopKSoftmax;
      TQ_CHECK((softmax && !M.correction_bias) || M.router == Router::kSigmoidGroupTopK, where,
               "{} layer {}: router '{}' with a correction bias does not run yet", c.model_type, l,
               RouterName(M.router));
      TQ_CHECK(F.act == Activation::kSilu || F.act == Activation::kClampedSwiglu, where,
               "{} layer {}: MoE experts with the {} activation do not run yet", c.model_type, l,
               ActivationName(F.act));
      L.moe = std::make_unique<MoeBlock>();
      L.moe->router = linear(name(nm.router), M.num_experts, hidden, M.router_bias);
      L.moe->act = F.act;
      L.moe->routed_scale = M.routed_scale;
      L.moe->router_kind = M.router == Router::kSigmoidGroupTopK ? M.router : Router::kSoftmaxTopK;
      L.moe->n_group = M.n_group;
      L.moe->topk_group = M.topk_group;
      if (M.correction_bias)
        L.moe->correction_bias = LoadVector(ckpt, name(nm.router_correction_bias), M.num_experts);
      L.moe->top_k = M.top_k;
      L.moe->renormalize = M.renormalize || M.router == Router::kTopKSoftmax;
      // gpt_oss as published: fused [E, ...] tensors, rearranged here; as converted (or any
      // other family): one linear per expert and projection, read as stored.
      const bool fused = M.fused_experts &&
                         (ckpt.Has(name(nm.experts_gate_up)) || ckpt.Has(name(nm.experts_down)));
      if (fused) {
        LoadFusedExperts(ckpt, name(nm.experts_gate_up), name(nm.experts_down), M.num_experts,
                         hidden, M.expert_ffn, *w, L.moe->experts);
      }
      for (int64_t e = 0; e < M.num_experts && !fused; ++e) {
        L.moe->experts.push_back(
            LoadMlp(ckpt, TensorName(nm.expert_gate, l, e), TensorName(nm.expert_up, l, e),
                    TensorName(nm.expert_down, l, e), hidden, M.expert_ffn, M.expert_bias, packed));
      }
      if (M.shared_ffn > 0) {
        L.shared = std::make_unique<GatedMlp>(LoadMlp(ckpt, name(nm.shared_gate),
                                                      name(nm.shared_up), name(nm.shared_down),
                                                      hidden, M.shared_ffn, false, packed));
        if (M.shared_gate) L.shared_gate = linear(name(nm.shared_expert_gate), 1, hidden, false);
      }
    } else if (F.kind == FfnKind::kDense) {
      if (!F.gated()) {  // ReLU² (nemotron_h): up, down
        TQ_CHECK(!F.fused_gate_up, where, "{} layer {}: a fused gate_up without a gate",
                 c.model_type, l);
        L.mlp = std::make_unique<GatedMlp>();
        L.mlp->up = linear(name(nm.up), F.ffn, hidden, F.bias);
        L.mlp->down = linear(name(nm.down), hidden, F.ffn, F.bias);
      } else if (F.fused_gate_up) {
        const std::string gu = name(nm.gate_up);
        L.mlp = std::make_unique<GatedMlp>();
        L.mlp->gate = LoadLinearRows(ckpt, gu, 2 * F.ffn, 0, F.ffn, hidden, F.bias, packed);
        L.mlp->up = LoadLinearRows(ckpt, gu, 2 * F.ffn, F.ffn, F.ffn, hidden, F.bias, packed);
        L.mlp->down = linear(name(nm.down), hidden, F.ffn, F.bias);
      } else {
        L.mlp = std::make_unique<GatedMlp>(LoadMlp(ckpt, name(nm.gate), name(nm.up), name(nm.down),
                                                   hidden, F.ffn, F.bias, packed));
      }
    }  // FfnKind::kNone: a mixer-only layer (nemotron_h)
  }
  return w;
}

std::vector<FloatParam*> LayerParams(LayerWeights& L) {
  std::vector<FloatParam*> out;
  for (FloatParam* p :
       {&L.attn_norm,     &L.ffn_norm,      &L.q_norm,        &L.k_norm,       &L.post_attn_norm,
        &L.post_ffn_norm, &L.rope_inv_freq, &L.sinks,         &L.mla_q_a_norm, &L.mla_kv_a_norm,
        &L.mla_uk_t,      &L.mla_uv,        &L.dn_conv,       &L.dn_a_log,     &L.dn_dt_bias,
        &L.dn_norm,       &L.ssm_conv,      &L.ssm_conv_bias, &L.ssm_a,        &L.ssm_d,
        &L.ssm_dt_bias,   &L.ssm_norm,      &L.v_norm,        &L.ple_post_norm})
    if (!p->empty()) out.push_back(p);
  return out;
}

std::vector<Linear*> LayerMixerLinears(LayerWeights& L) {
  std::vector<Linear*> out;
  for (Linear* lin : {L.q.get(),        L.k.get(),       L.v.get(),          L.o.get(),
                      L.mla_q_a.get(),  L.mla_q_b.get(), L.mla_kv_a_c.get(), L.mla_kv_a_pe.get(),
                      L.mla_kv_b.get(), L.dn_qkvz.get(), L.dn_ba.get(),      L.dn_qkv.get(),
                      L.dn_z.get(),     L.dn_b.get(),    L.dn_a.get(),       L.dn_out.get(),
                      L.ssm_z.get(),    L.ssm_xbc.get(), L.ssm_dt.get(),     L.ssm_out.get(),
                      L.ple_gate.get(), L.ple_proj.get()})
    if (lin) out.push_back(lin);
  return out;
}

void UploadWeights(ModelWeights& w, kernels::Backend& be) {
  w.lm_head->Upload(be, "the LM head");
  if (w.embed_packed) {
    if (w.lm_head_tied && w.lm_head->AsPacked()) {
      w.embed_packed->ShareUpload(*w.lm_head->AsPacked());
    } else {
      w.embed_packed->Upload(be, "the embedding");
    }
  } else if (w.lm_head_tied && w.lm_head->AsDense()) {
    w.embed_device = w.lm_head->AsDense()->device_weight();
  } else {
    w.embed_buf = be.Upload(w.embed.data, w.embed.nbytes(), "the embedding");
    w.embed_device = w.embed;
    w.embed_device.data = w.embed_buf.data();
  }
  w.final_norm.Upload(be, "the final norm");
  if (w.ple_model_proj) {
    w.ple_embed_buf = be.Upload(w.ple_embed.data, w.ple_embed.nbytes(), "the per-layer embedding");
    w.ple_embed_device = w.ple_embed;
    w.ple_embed_device.data = w.ple_embed_buf.data();
    w.ple_model_proj->Upload(be, "the per-layer input projection");
    w.ple_proj_norm.Upload(be, "the per-layer input norm");
  }
  w.rope_inv_freq = FloatParam(w.rope.inv_freq);
  w.rope_inv_freq.Upload(be, "the RoPE table");
  auto mlp = [&](GatedMlp& m, std::string_view what) {
    if (m.gate) m.gate->Upload(be, what);
    m.up->Upload(be, what);
    m.down->Upload(be, what);
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const std::string what = fmt::format("layer {}", l);
    for (FloatParam* p : LayerParams(L)) p->Upload(be, what);
    for (Linear* lin : LayerMixerLinears(L)) lin->Upload(be, what);
    if (L.mlp) mlp(*L.mlp, what);
    if (L.moe) {
      L.moe->router->Upload(be, what);
      for (GatedMlp& e : L.moe->experts) {
        if (!L.moe->streamed) {
          mlp(e, what);
          continue;
        }
        for (Linear* lin : {e.gate.get(), e.up.get(), e.down.get()})
          lin->UploadExceptStorage(be, what);
      }
    }
    if (L.shared) mlp(*L.shared, what);
    if (L.shared_gate) L.shared_gate->Upload(be, what);
  }
}

}  // namespace tq
