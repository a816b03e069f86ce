#include "model/model.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/architecture.h"
#include "model/expert_cache.h"
#include "model/packed_linear.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace tq {
namespace {

void ValidateConfig(const ModelConfig& c, const std::string& where) {
  TQ_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0 && c.num_heads > 0 &&
               c.intermediate_size >= 0,
           where,
           "vocab_size, hidden_size, num_hidden_layers and num_attention_heads must be "
           "positive");
  TQ_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, where,
           "num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", c.num_heads,
           c.num_kv_heads);
  TQ_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, where, "head_dim must be even, got {}",
           c.head_dim);
}

// The family ops (kernels::FamilyOp) the spec needs, so that a backend without one is refused at
// load with the op's name instead of failing in the middle of a forward pass.
void CheckBackendSupports(const ModelSpec& spec, const kernels::Backend& be) {
  using kernels::FamilyOp;
  std::vector<FamilyOp> need;
  if (spec.embed_scale != 1.0f) need.push_back(FamilyOp::kScale);
  if (spec.final_logit_softcap > 0) need.push_back(FamilyOp::kSoftcap);
  for (const LayerSpec& L : spec.layers) {
    if (L.ffn.act == Activation::kGeluTanh) need.push_back(FamilyOp::kGeluTanhMul);
    if (L.ffn.act == Activation::kClampedSwiglu) need.push_back(FamilyOp::kClampedSwiglu);
    if (L.attn.logit_softcap > 0 || L.attn.sinks) need.push_back(FamilyOp::kAttentionVariant);
    if (L.ffn.kind == FfnKind::kMoe && L.ffn.moe.shared_gate)
      need.push_back(FamilyOp::kSigmoidGateRows);
    if (L.HasKvCache() && L.attn.output_gate) need.push_back(FamilyOp::kSigmoidGateRows);
    if (L.HasKvCache() && L.attn.rope.rotary_dim > 0 && L.attn.rope.rotary_dim < L.attn.head_dim)
      need.push_back(FamilyOp::kPartialRope);
    if (L.HasRecurrentState()) need.push_back(FamilyOp::kCausalConv1d);
    if (L.mixer == MixerKind::kGatedDeltaNet)
      for (FamilyOp op :
           {FamilyOp::kGatedDeltaNet, FamilyOp::kDeltaNetGates, FamilyOp::kGatedRmsNorm})
        need.push_back(op);
    if (L.mixer == MixerKind::kMamba2)
      for (FamilyOp op : {FamilyOp::kSsd, FamilyOp::kSsmDt, FamilyOp::kGatedRmsNorm})
        need.push_back(op);
    if (L.mixer == MixerKind::kMla) need.push_back(FamilyOp::kHeadMatMul);
    if (L.ffn.kind != FfnKind::kNone && L.ffn.act == Activation::kRelu2)
      need.push_back(FamilyOp::kRelu2);
  }
  for (FamilyOp op : need)
    TQ_CHECK(be.SupportsFamilyOp(op), std::string(be.name()),
             "{} needs op '{}', which this backend does not have yet (run with --device cpu)",
             spec.model_type, kernels::FamilyOpName(op));
}

}  // namespace

Model::Model() : ws_(std::make_unique<ForwardWorkspace>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::Load(const std::string& dir, const ModelLoadOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  m->config_ = LoadModelConfig(dir);
  ValidateConfig(m->config_, dir + "/config.json");
  m->arch_ = &FindArchitecture(m->config_);
  m->backend_ =
      &kernels::GetBackend(opts.device.empty() ? kernels::DefaultDeviceName() : opts.device);
  if (opts.device_memory_limit > 0) m->backend_->SetMemoryLimit(opts.device_memory_limit);
  m->checkpoint_ = Checkpoint::Open(dir);
  m->weights_ = LoadWeights(*m->checkpoint_, m->config_, *m->arch_);
  CheckBackendSupports(m->weights_->spec, *m->backend_);
  if (opts.expert_cache_bytes >= 0) {
    ExpertCacheOptions eo;
    eo.budget_bytes = opts.expert_cache_bytes;
    if (opts.expert_cache_policy == "lfu") {
      eo.policy = ExpertCachePolicy::kLfu;
    } else if (opts.expert_cache_policy != "lru") {
      throw UsageError("--expert-cache-policy",
                       fmt::format("'{}' is not a policy (lru, lfu)", opts.expert_cache_policy));
    }
    eo.reader_threads = opts.expert_readers;
    eo.host_copy = opts.expert_host_copy;
    m->expert_cache_ =
        std::make_unique<ExpertCache>(*m->checkpoint_, *m->weights_, *m->backend_, eo);
  }
  UploadWeights(*m->weights_, *m->backend_);
  return m;
}

int64_t Model::WeightBytes() const {
  const ModelWeights& w = *weights_;
  int64_t bytes = int64_t(w.embed.nbytes() + w.final_norm.size() * sizeof(float));
  if (w.embed_packed) bytes += w.embed_packed->WeightBytes();
  if (!w.lm_head_tied) bytes += w.lm_head->WeightBytes();
  if (w.ple_model_proj)  // gemma4's per-layer input embeddings
    bytes += int64_t(w.ple_embed.nbytes() + w.ple_proj_norm.size() * sizeof(float)) +
             w.ple_model_proj->WeightBytes();
  auto mlp_bytes = [](const GatedMlp& m) {
    return (m.gate ? m.gate->WeightBytes() : 0) + m.up->WeightBytes() + m.down->WeightBytes();
  };
  for (const LayerWeights& L : w.layers) {
    LayerWeights& lw = const_cast<LayerWeights&>(L);  // the lists hand out mutable pointers
    for (const FloatParam* p : LayerParams(lw))
      if (p != &L.rope_inv_freq && p != &L.sinks && p != &L.v_norm)
        bytes += int64_t(p->size() * sizeof(float));
    for (const Linear* lin : LayerMixerLinears(lw)) bytes += lin->WeightBytes();
    if (L.shared_gate) bytes += L.shared_gate->WeightBytes();
    if (L.shared) bytes += mlp_bytes(*L.shared);
    if (L.mlp) bytes += mlp_bytes(*L.mlp);
    if (L.moe) {
      bytes += L.moe->router->WeightBytes();
      for (const GatedMlp& e : L.moe->experts) bytes += mlp_bytes(e);
    }
  }
  return bytes;
}

int64_t Model::ResidentWeightBytes() const {
  int64_t bytes = WeightBytes();
  for (const LayerWeights& L : weights_->layers) {
    if (!L.moe || !L.moe->streamed) continue;
    for (const GatedMlp& e : L.moe->experts)
      for (const Linear* lin : {e.gate.get(), e.up.get(), e.down.get()})
        for (const Linear::StorageSpan& s : lin->StorageSpans()) bytes -= int64_t(s.bytes);
  }
  return bytes;
}

KvLayout Model::kv_layout() const {
  KvLayout l = KvLayoutOf(weights_->spec);
  for (size_t i = 0; i < weights_->layers.size(); ++i) {
    const LayerWeights& L = weights_->layers[i];
    if (L.kv_index >= 0) l.sinks.push_back(L.sinks.empty() ? nullptr : L.sinks.data());
  }
  return l;
}

std::unique_ptr<KvCache> Model::NewCache(const KvCacheOptions& opts) const {
  return MakeKvCache(kv_layout(), opts, *backend_);
}

void Model::CheckCache(const KvCache& cache, int64_t n) const {
  const KvLayout& l = cache.layout();
  const CacheGeometry g = CacheGeometryOf(weights_->spec);
  const ModelSpec& spec = weights_->spec;
  const int64_t recurrent =
      spec.CountMixer(MixerKind::kGatedDeltaNet) + spec.CountMixer(MixerKind::kMamba2);
  const int64_t kv_layers =
      spec.CountMixer(MixerKind::kAttention) + spec.CountMixer(MixerKind::kMla);
  TQ_CHECK(l.num_layers == kv_layers && l.num_kv_heads == g.kv_heads && l.num_heads == g.heads &&
               l.head_dim == g.head_dim && int64_t(l.recurrent_floats.size()) == recurrent,
           "model forward",
           "the KV cache was made for another model ({} attention layers, {} kv heads, {} "
           "recurrent layers)",
           l.num_layers, l.num_kv_heads, l.recurrent_floats.size());
  TQ_CHECK(&cache.backend() == backend_, "model forward",
           "the KV cache lives on backend '{}' but the model runs on '{}' (make caches with "
           "Model::NewCache)",
           cache.backend().name(), backend_->name());
  TQ_CHECK(cache.size() + n <= cache.capacity(), "model forward",
           "{} tokens at position {} overflow the KV cache (capacity {} tokens)", n, cache.size(),
           cache.capacity());
}

void Model::CheckTokens(std::span<const int32_t> tokens) const {
  for (int32_t t : tokens)
    TQ_CHECK(t >= 0 && t < config_.vocab_size, "model forward", "token id {} out of range [0, {})",
             t, config_.vocab_size);
}

void Model::Forward(std::span<const int32_t> tokens, KvCache& cache, float* logits,
                    bool all_logits) {
  ForwardChunks(tokens, cache, logits, all_logits, false);
}

void Model::ForwardHidden(std::span<const int32_t> tokens, KvCache& cache, float* hidden) {
  ForwardChunks(tokens, cache, hidden, true, true);
}

void Model::ForwardChunks(std::span<const int32_t> tokens, KvCache& cache, float* out,
                          bool all_logits, bool hidden) {
  const int64_t n = int64_t(tokens.size());
  TQ_CHECK(n > 0, "model forward", "no tokens to run");
  CheckCache(cache, n);
  CheckTokens(tokens);  // all of them before the first chunk changes the cache
  // Long prompts run in chunks: same result (attention is causal), bounded workspace. A chunk
  // never exceeds what the cache's sliding-window layers have room for (kv_cache.h).
  const int64_t chunk = std::min(kDefaultMaxAppend, cache.max_append());
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    const Segment seg{&cache, 0, count};
    std::vector<int64_t>& rows = ws_->logit_rows_host;  // reused: no allocation per decode step
    rows.clear();
    if (all_logits) {
      for (int64_t r = 0; r < count; ++r) rows.push_back(r);
    } else if (begin + count == n) {
      rows.push_back(count - 1);
    }
    const int64_t width = hidden ? config_.hidden_size : config_.vocab_size;
    hidden_rows_ = hidden;
    try {
      Run(tokens.subspan(size_t(begin), size_t(count)), {&seg, 1}, rows,
          all_logits ? out + begin * width : out);
    } catch (...) {
      hidden_rows_ = false;
      throw;
    }
    hidden_rows_ = false;
  }
}

void Model::DecodeBatch(std::span<const int32_t> tokens, std::span<KvCache* const> caches,
                        float* logits) {
  TQ_CHECK(tokens.size() == caches.size() && !tokens.empty(), "model decode batch",
           "{} tokens for {} caches", tokens.size(), caches.size());
  CheckTokens(tokens);
  std::vector<Segment>& segs = segments_;
  std::vector<int64_t>& rows = ws_->logit_rows_host;
  segs.clear();
  rows.clear();
  for (size_t i = 0; i < caches.size(); ++i) {
    TQ_CHECK(caches[i] != nullptr, "model decode batch", "cache {} is null", i);
    for (size_t j = 0; j < i; ++j)
      TQ_CHECK(caches[j] != caches[i], "model decode batch", "caches {} and {} are the same", j, i);
    CheckCache(*caches[i], 1);
    segs.push_back({caches[i], int64_t(i), 1});
    rows.push_back(int64_t(i));
  }
  Run(tokens, segs, rows, logits);
}

void Model::ForwardBatch(std::span<const int32_t> tokens, std::span<const BatchPart> parts,
                         float* logits) {
  TQ_CHECK(!parts.empty(), "model forward batch", "no sequences to run");
  CheckTokens(tokens);
  std::vector<Segment>& segs = segments_;
  std::vector<int64_t>& rows = ws_->logit_rows_host;
  segs.clear();
  rows.clear();
  int64_t begin = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const BatchPart& p = parts[i];
    TQ_CHECK(p.cache != nullptr && p.count >= 1, "model forward batch",
             "part {} has no cache or no tokens", i);
    for (size_t j = 0; j < i; ++j)
      TQ_CHECK(parts[j].cache != p.cache, "model forward batch", "parts {} and {} share a cache", j,
               i);
    CheckCache(*p.cache, p.count);
    TQ_CHECK(p.count <= p.cache->max_append(), "model forward batch",
             "part {} appends {} tokens; its cache takes at most {} per pass (max_append: "
             "sliding-window layers hold window + max_append positions)",
             i, p.count, p.cache->max_append());
    segs.push_back({p.cache, begin, p.count});
    begin += p.count;
    if (p.logits) rows.push_back(begin - 1);
  }
  TQ_CHECK(begin == int64_t(tokens.size()), "model forward batch",
           "the parts hold {} tokens, {} were given", begin, tokens.size());
  Run(tokens, segs, rows, logits);
}

}  // namespace tq
