#include "model/weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/architecture.h"
#include "model/packed_linear.h"

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

}  // namespace

ModelWeights::ModelWeights() = default;
ModelWeights::~ModelWeights() = default;

std::unique_ptr<ModelWeights> LoadWeights(const Checkpoint& ckpt, const ModelConfig& c,
                                          const Architecture& arch) {
  const ArchTensorNames& nm = arch.names;
  const std::string where = "checkpoint " + ckpt.dir();
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  auto w = std::make_unique<ModelWeights>();

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
  w->final_norm = LoadVector(ckpt, nm.final_norm, hidden);
  w->rope = ComputeRopeFrequencies(c, hd);

  const bool qkv_bias = arch.qkv_bias || c.attention_bias;
  const bool o_bias = arch.o_bias_follows_config && c.attention_bias;
  const bool qk_norm = arch.qk_norm || c.qk_norm;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto name = [&](const std::string& pattern) { return TensorName(pattern, l); };
    LayerWeights& L = w->layers.emplace_back();
    L.attn_norm = LoadVector(ckpt, name(nm.attn_norm), hidden);
    L.ffn_norm = LoadVector(ckpt, name(nm.ffn_norm), hidden);
    L.q = linear(name(nm.q), c.num_heads * hd, hidden, qkv_bias);
    L.k = linear(name(nm.k), c.num_kv_heads * hd, hidden, qkv_bias);
    L.v = linear(name(nm.v), c.num_kv_heads * hd, hidden, qkv_bias);
    L.o = linear(name(nm.o), hidden, c.num_heads * hd, o_bias);
    if (qk_norm) {
      L.q_norm = LoadVector(ckpt, name(nm.q_norm), hd);
      L.k_norm = LoadVector(ckpt, name(nm.k_norm), hd);
    }
    if (arch.sliding_window && c.LayerIsSliding(l)) L.window = c.sliding_window;
    if (arch.moe && c.LayerIsMoe(l)) {
      TQ_CHECK(c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.num_experts, where,
               "num_experts_per_tok = {} with {} experts", c.num_experts_per_tok, c.num_experts);
      const int64_t ffn =
          c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
      L.moe = std::make_unique<MoeBlock>();
      L.moe->router = linear(name(nm.router), c.num_experts, hidden, false);
      L.moe->top_k = c.num_experts_per_tok;
      L.moe->renormalize = arch.moe_always_renormalize || c.norm_topk_prob;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        L.moe->experts.push_back(
            LoadMlp(ckpt, TensorName(nm.expert_gate, l, e), TensorName(nm.expert_up, l, e),
                    TensorName(nm.expert_down, l, e), hidden, ffn, false, packed));
      }
    } else {
      L.mlp = std::make_unique<GatedMlp>(LoadMlp(ckpt, name(nm.gate), name(nm.up), name(nm.down),
                                                 hidden, c.intermediate_size, c.mlp_bias, packed));
    }
  }
  return w;
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
  w.rope_inv_freq = FloatParam(w.rope.inv_freq);
  w.rope_inv_freq.Upload(be, "the RoPE table");
  auto mlp = [&](GatedMlp& m, std::string_view what) {
    m.gate->Upload(be, what);
    m.up->Upload(be, what);
    m.down->Upload(be, what);
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const std::string what = fmt::format("layer {}", l);
    for (FloatParam* p : {&L.attn_norm, &L.ffn_norm, &L.q_norm, &L.k_norm}) p->Upload(be, what);
    for (Linear* lin : {L.q.get(), L.k.get(), L.v.get(), L.o.get()}) lin->Upload(be, what);
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
  }
}

}  // namespace tq
