// The model of memory behind `plan` (memory_plan.h): weights, KV, workspace, reserve, verdict.
//
// Calibration (Release build, x86-64, glibc; peak RSS of `generate` / `bench` against the parts,
// tests/runtime/plan_accuracy_test.cc): the binary and its libraries leave ~16 MiB resident
// (smaps of `generate` on a 17M MoE, 2026-12-02: file-backed 16.1 MiB — the binary 3.6,
// libcurl's TLS stack (libcrypto, gnutls, krb5, ...) ~5.5, libstdc++ 1.7, libc 1.4, ICU 0.9 —
// plus ~1.6 MiB of thread stacks and other anonymous maps; `turboquant --version` alone 13.9); a
// tokenizer.json BPE tokenizer keeps ~150 bytes per vocabulary entry live and, while loading,
// takes ~530 more that it frees (the parsed JSON); that freed heap stays in the allocator's arena
// and the forward pass's buffers reuse it (peak = max(workspace, that transient));
// each worker thread ~128 KiB (stack, thread-local kernel scratch, malloc arena).
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "core/sysinfo.h"
#include "io/checkpoint.h"
#include "io/tqmlx_import.h"
#include "kv/kv_cache_bytes.h"
#include "model/architecture.h"
#include "model/layer_spec.h"
#include "model/moe_forward.h"
#include "model/source_tensors.h"
#include "model/tensor_roles.h"
#include "runtime/plan/budget_projection.h"
#include "runtime/plan/device_memory.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/plan/plan_report.h"

namespace tq {
namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kReserveBase = 16 * kMiB;
constexpr int64_t kTokenizerLiveBytesPerEntry = 150;
constexpr int64_t kTokenizerTransientBytesPerEntry = 530;
constexpr int64_t kThreadBytes = 128 * 1024;
// A CUDA context (driver, cuBLAS handles, kernels) on the device: an estimate, not measured.
constexpr int64_t kCudaContextBytes = 512 * kMiB;
// The tensor-core GEMMs of prompts (kernels/cuda/cuda_backend.cc): cuBLAS's workspace (32 MiB),
// one chunk of dequantized weight rows (at most 64 Mi bf16) and x as two bf16 copies.
constexpr int64_t kCudaBlasWorkspaceBytes = 32 * kMiB, kCudaDequantChunkBytes = 128 * kMiB;
// Model::Forward runs prompts in chunks of at most this many rows (model.cc kMaxChunk).
constexpr int64_t kModelMaxChunk = 512;
// The CPU GEMM packs its input transposed in blocks of up to 64 rows (kernels/cpu/matmul.cc),
// above kDotMaxRows = 15 rows.
constexpr int64_t kGemmRowBlock = 64;
constexpr int64_t kGemmMinRows = 16;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

// Bytes of the forward pass's buffers for a chunk of n rows (workspace.h, forward.cc), from the
// model's layer spec: fp32 x, h, y [n, hidden]; q [n, heads*hd] and attn [n, max(heads*hd,
// hidden)], k, v [n, kv_heads*hd] at the cache geometry (the widest head: CacheGeometryOf);
// gate, up [n, ffn]; MoE (moe_forward.cc): the gathered expert inputs and outputs [S, hidden] and
// gate, up [S, moe ffn] of a run of experts of S = min(n * top_k, max(n, kMinGroupedSlots)) slots,
// router probabilities [n, experts]; the mixers' own buffers per row, for each mixer kind its
// largest layer's, summed over the kinds (output-gated attention's [q | gate] rows and gate half,
// gemma4's narrow-head staging, MLA staging, Gated DeltaNet or Mamba-2); gemma4's per-layer
// inputs [n, layers, d] twice plus a layer's slice and gate [n, d]; the GEMM's packed input
// [round_up(n, 64), max in]; the logits row [vocab] the caller keeps.
int64_t ForwardWorkspaceBytes(const ModelConfig& c, int64_t n, int threads) {
  const ModelSpec spec = BuildModelSpec(c, FindArchitecture(c));
  const CacheGeometry geo = CacheGeometryOf(spec);
  const int64_t hidden = spec.hidden, hd = geo.head_dim;
  const int64_t qdim = geo.heads * hd, kvdim = geo.kv_heads * hd;
  int64_t ffn = 0, moe_ffn = 0, experts = 0, top_k = 0, mixer_fixed = 0;
  // The mixers' own buffers per row (floats), the largest of each kind's layers: kinds coexist
  // in one model (DeltaNet beside gated attention), their buffers do too.
  int64_t attn_row = 0, mla_row = 0, recurrent_row = 0;
  bool any_moe = false;
  for (const LayerSpec& L : spec.layers) {
    if (L.ffn.kind == FfnKind::kMoe) {
      any_moe = true;
      moe_ffn = std::max(moe_ffn, L.ffn.moe.expert_ffn);
      ffn = std::max({ffn, L.ffn.moe.expert_ffn, L.ffn.moe.shared_ffn});
      experts = std::max(experts, L.ffn.moe.num_experts);
      top_k = std::max(top_k, L.ffn.moe.top_k);
    } else if (L.ffn.kind == FfnKind::kDense) {
      ffn = std::max(ffn, L.ffn.ffn);
    }
    switch (L.mixer) {
      case MixerKind::kMla: {  // staging (forward.cc) and the query latent of q_a
        const MlaSpec& m = L.mla;
        const int64_t H = L.attn.num_heads, R = m.kv_lora_rank, dr = m.rope_dim;
        // [q_b out | q_lat | q_pe | k_pe | c_kv | k_pe raw | o] a row; the regions' alignment
        // to gcd(kv_lora, rope) once.
        mla_row = std::max(mla_row, H * (m.nope_dim + dr) + H * R + H * dr + dr + R + dr +
                                        H * m.v_dim + m.q_lora_rank);
        mixer_fixed = std::max(mixer_fixed, 6 * std::gcd(R, dr));
        break;
      }
      case MixerKind::kGatedDeltaNet: {  // qkv, conv [C]; z, out [V]; gates 2 Hv, g, beta
        const DeltaNetSpec& d = L.delta;
        int64_t row = 2 * d.ConvDim() + 2 * d.ValueDim() + 4 * d.num_v_heads;
        if (d.fused_in_proj) row += 2 * d.KeyDim() + 2 * d.ValueDim() + 2 * d.num_v_heads;
        recurrent_row = std::max(recurrent_row, row);
        break;
      }
      case MixerKind::kMamba2: {  // z, out [inner]; xBC, conv [C]; dt raw and dt [heads]
        const Mamba2Spec& m = L.mamba;
        recurrent_row = std::max(recurrent_row, 2 * m.Inner() + 2 * m.ConvDim() + 2 * m.num_heads);
        break;
      }
      case MixerKind::kAttention: {
        int64_t row = 0;
        if (L.attn.output_gate) row += 3 * qdim;  // q_proj rows [q | gate] and the gate half
        if (L.attn.head_dim < hd) {  // a head narrower than the cache's: [q | k | v] at its size
          row += (geo.heads + 2 * geo.kv_heads) * L.attn.head_dim;
          mixer_fixed = std::max(mixer_fixed, std::gcd(L.attn.head_dim, hd));
        }
        attn_row = std::max(attn_row, row);
        break;
      }
      case MixerKind::kNone:
        break;
    }
  }
  const int64_t mixer_row = attn_row + mla_row + recurrent_row;
  int64_t floats_per_row =
      3 * hidden + qdim + std::max(qdim, hidden) + 2 * kvdim + 2 * ffn + experts + mixer_row;
  if (spec.per_layer_input_dim > 0)
    floats_per_row += (2 * c.num_layers + 2) * spec.per_layer_input_dim;
  int64_t floats = n * floats_per_row + mixer_fixed + c.vocab_size;
  if (any_moe) {
    const int64_t slots = std::min(n * top_k, std::max(n, kMinGroupedSlots));
    floats += slots * 2 * hidden + std::max<int64_t>(0, slots - n) * 2 * moe_ffn;
  }
  if (n >= kGemmMinRows) floats += RoundUp(n, kGemmRowBlock) * std::max({hidden, qdim, ffn});
  // Attention scratch per thread: two key/value blocks of 64 positions + 16 query rows.
  const int64_t group = geo.heads / std::max<int64_t>(1, geo.kv_heads);
  floats += int64_t(threads) * (2 * 64 * hd + 16 * group * (hd + 2) + 64);
  // MoE routing vectors: chosen ids/weights, slots [n * top_k].
  const int64_t routing = any_moe ? n * top_k * 24 : 0;
  return floats * 4 + routing;
}

namespace {

std::string RecipeSummary(const QuantRecipeOptions& o) {
  std::string s = fmt::format("projected: {} {}-bit g{}",
                              o.method == quant::QuantMethod::kAffine ? "affine" : "turboquant",
                              o.bits, o.group_size);
  if (o.rotation == RotationKind::kNone) s += ", no rotation";
  if (o.scale_format == quant::ScaleFormat::kE8) s += " e8 scales";
  if (o.embed_bits < 16) s += fmt::format(", embeddings {}-bit", o.embed_bits);
  return s;
}

}  // namespace

const char* PlanVerdictName(PlanVerdict v) {
  switch (v) {
    case PlanVerdict::kFits:
      return "fits";
    case PlanVerdict::kFitsSmaller:
      return "fits_smaller";
    case PlanVerdict::kDoesNotFit:
      return "does_not_fit";
  }
  return "?";
}

KvLayout KvLayoutForConfig(const ModelConfig& c) {
  // The layout the model gives its caches (model/spec_kv_layout.cc): attention layers (MLA: one
  // latent head [c_kv | k_pe]) and the recurrent layers' state.
  return KvLayoutOf(BuildModelSpec(c, FindArchitecture(c)));
}

MemoryBreakdown PlanMemoryAt(const MemoryPlan& p, const PlanOptions& opts, int64_t context,
                             int64_t prefill_step) {
  MemoryBreakdown m;
  m.weights = p.weights_bytes + p.derived_bytes;
  if (p.lookup_table_bytes > 0) {
    // An untied embedding is read by row: at most one row per distinct token of the context.
    const int64_t rows = std::min(p.config.vocab_size, context);
    m.weights += -p.lookup_table_bytes + p.lookup_table_bytes / p.config.vocab_size * rows;
  }
  m.kv = KvCacheBytes(KvLayoutForConfig(p.config), opts.kv, context);
  const int64_t n = std::clamp<int64_t>(prefill_step, 1, kModelMaxChunk);
  m.workspace = ForwardWorkspaceBytes(p.config, n, p.threads);
  m.reserve = p.reserve_base + p.reserve_tokenizer + p.reserve_threads + p.reserve_device;
  m.load_transient = p.tokenizer_load_transient;
  return m;
}

namespace {

// Sets file/weights/unused/lookup/expert bytes of `p` from the headers (and the recipe).
void PlanWeights(const PlanOptions& opts, const std::vector<TensorInfo>& stored, MemoryPlan& p) {
  for (const TensorInfo& t : stored) p.file_bytes += int64_t(t.nbytes);
  // A projected conversion reads the tensors as convert does (gpt_oss's experts one by one,
  // MXFP4 / FP8 decoded: model/source_tensors.h); a stored checkpoint is what it stores.
  std::vector<TensorInfo> tensors = stored;
  if (opts.recipe) {
    tensors = SourceInfos(SourceTensors(p.config, stored));
  } else if (p.checkpoint_kind != "turboquant") {
    try {
      if (const std::vector<SourceTensor> s = SourceTensors(p.config, stored);
          const SourceTensor* d = FirstDecodedSource(s))
        p.notes.push_back(fmt::format(
            "'{}' is stored as {}, which only convert reads: plan with --bits (or --budget-bpw) "
            "to see the converted model",
            d->info.name, d->kind == SourceTensor::Kind::kFp8Block ? "FP8" : "MXFP4"));
    } catch (const Error&) {
      // a broken hub layout: plan the tensors as stored (doctor says what is wrong)
    }
  }
  const TensorRoleMap roles = TensorRoleMap::Of(p.config, tensors);
  const bool converted = p.checkpoint_kind == "turboquant";
  std::optional<QuantRecipe> recipe;
  if (opts.budget_bpw > 0 && !opts.recipe)
    throw UsageError(fmt::format("--budget-bpw {}", opts.budget_bpw),
                     "only applies to a projected conversion of a Hugging Face checkpoint");
  if (opts.recipe) {
    recipe = PlanQuantization(p.config, tensors, *opts.recipe);
    p.recipe_notes = recipe->notes;
    p.weights_source = RecipeSummary(*opts.recipe);
  } else {
    p.weights_source = converted ? "stored (TurboQuant checkpoint)" : "stored";
  }
  bool has_lm_head = false;
  for (const TensorInfo& t : tensors) {
    const auto e = roles.Classify(t.name);
    has_lm_head = has_lm_head || (e && e->role == TensorRole::kLmHead);
  }
  // The loader ties the head to the embedding when the config says so or there is no head.
  const bool tied = p.config.tie_word_embeddings || !has_lm_head;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    const int64_t bytes = recipe ? recipe->tensors[i].projected_bytes : int64_t(t.nbytes);
    const auto e = roles.Classify(t.name);
    const bool used = e ? !(e->role == TensorRole::kLmHead && tied) : converted;
    if (!used) {
      p.unused_bytes += bytes;
      continue;
    }
    p.weights_bytes += bytes;
    if (e && e->role == TensorRole::kEmbed && !tied) p.lookup_table_bytes += bytes;
    if (e && IsExpert(e->role)) p.expert_bytes += bytes;
  }
  if (opts.target_bytes > 0) {
    if (!recipe)
      throw UsageError(fmt::format("--target-size {}", opts.target_bytes),
                       "only applies to a projected conversion of a Hugging Face checkpoint");
    // The least the allocator can reach: every linear at 2 bits, embeddings at 4, group 128.
    QuantRecipeOptions least = *opts.recipe;
    least.bits = 2;
    least.attn_bits = least.mlp_bits = least.expert_down_bits = 0;
    least.group_size = least.mlp_group_size = 128;
    least.protect_layers.clear();
    least.tensor_bits.clear();
    least.embed_bits = 4;
    least.scale_format = quant::ScaleFormat::kE8;
    const int64_t smallest = PlanQuantization(p.config, tensors, least).projected_bytes;
    if (opts.target_bytes < smallest)
      throw UsageError(fmt::format("--target-size {}", opts.target_bytes),
                       fmt::format("below the smallest possible file, {:.2f} MB (every linear "
                                   "at 2 bits, the embedding at 4)",
                                   double(smallest) / 1e6));
    p.target_bytes = opts.target_bytes;
    // A tied model's unused head is not in the converted file; the file holds the weights.
    p.weights_bytes = opts.target_bytes;
    p.unused_bytes = 0;
    p.weights_source += fmt::format(", whole file at most {:.2f} MB (--target-size, upper bound)",
                                    double(opts.target_bytes) / 1e6);
    p.recipe_notes.push_back(fmt::format(
        "--target-size: convert chooses every tensor's bits and group (embedding and LM head "
        "included) from measured sensitivities; the file is at most {:.2f} MB (the smallest "
        "possible: {:.2f} MB), so the weights are projected at that bound",
        double(opts.target_bytes) / 1e6, double(smallest) / 1e6));
  }
  if (opts.budget_bpw > 0) {
    const BudgetBound b = BoundBitBudget(*recipe, opts.budget_bpw);
    p.budget_bpw = opts.budget_bpw;
    p.budget_linear_bytes_before = b.linear_bytes_before;
    p.budget_linear_bytes_bound = b.linear_bytes_bound;
    p.weights_bytes += b.linear_bytes_bound - b.linear_bytes_before;
    if (p.expert_bytes > 0) p.expert_bytes = b.expert_bytes_bound;
    p.weights_source += fmt::format(", budget {} bits/weight (upper bound)", opts.budget_bpw);
    p.recipe_notes.push_back(fmt::format(
        "--budget-bpw {}: convert chooses each linear's bits from its measured error (that needs "
        "the weights); it guarantees codes + scales average at most {} bits per linear weight "
        "(reachable: {:.3f} to {:.3f}), so the decoder linears are projected at that bound, {} "
        "with codebooks and signs ({} by the recipe alone): the converted model is at most this",
        opts.budget_bpw, opts.budget_bpw, b.cheapest_bpw, b.ceiling_bpw,
        HumanBytes(b.linear_bytes_bound), HumanBytes(b.linear_bytes_before)));
  }
}

bool HasQuantizationBlock(const ModelConfig& c) {
  try {
    const auto j = nlohmann::json::parse(c.raw_json);
    return j.is_object() && j.contains("quantization");
  } catch (const nlohmann::json::exception&) {
    return false;  // LoadModelConfig parsed it already; not reached
  }
}

// The largest x in [lo, hi] with fits(x) (fits monotone decreasing); 0 if none.
template <typename Fits>
int64_t LargestFitting(int64_t lo, int64_t hi, Fits fits) {
  if (hi < lo || !fits(lo)) return 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

void CheckPlanOptions(const PlanOptions& opts) {
  if (opts.context < 0)
    throw UsageError("--ctx", fmt::format("must be >= 1 (0 = the default), got {}", opts.context));
  if (opts.prefill_step < 1)
    throw UsageError("--prefill-step", fmt::format("must be >= 1, got {}", opts.prefill_step));
  if (opts.ram_gb && !(*opts.ram_gb > 0))
    throw UsageError("--ram-gb", fmt::format("must be > 0, got {}", *opts.ram_gb));
}

}  // namespace

int64_t DefaultContextTokens(int64_t max_position_embeddings) {
  return max_position_embeddings > 0 ? std::min<int64_t>(max_position_embeddings, 8192) : 4096;
}

MemoryPlan MakeMemoryPlan(const PlanOptions& opts) {
  CheckPlanOptions(opts);
  PlanInputs in;
  in.config = LoadModelConfig(opts.model_dir);
  FindArchitecture(in.config.model_type);  // throws listing the supported ones
  in.tensors = Checkpoint::ReadHeaders(opts.model_dir);
  return MakeMemoryPlan(opts, in);
}

MemoryPlan MakeMemoryPlan(const PlanOptions& options, const PlanInputs& in) {
  CheckPlanOptions(options);
  PlanOptions opts = options;  // context 0: the default for the model (below)
  MemoryPlan p;
  p.model_dir = opts.model_dir;
  p.config = in.config;
  if (opts.context == 0) opts.context = DefaultContextTokens(p.config.max_position_embeddings);
  FindArchitecture(p.config.model_type);  // throws listing the supported ones
  const std::vector<TensorInfo>& tensors = in.tensors;
  p.checkpoint_kind = HasQuantizationBlock(p.config) ? "turboquant" : "hf";
  if (tqmlx::IsTqMlxDir(opts.model_dir)) p.source_format = tqmlx::kFormatName;
  if (opts.recipe && p.checkpoint_kind == "turboquant")
    throw UsageError("--bits",
                     "this is a TurboQuant checkpoint already: plan it as stored "
                     "(without --bits)");
  p.context = opts.context;
  p.prefill_step = opts.prefill_step;
  p.effective_step = std::min(opts.prefill_step, kModelMaxChunk);
  p.device = opts.device == PlanDevice::kCuda ? "cuda" : "cpu";
  PlanWeights(opts, tensors, p);
  for (const LayerSpec& L : BuildModelSpec(p.config, FindArchitecture(p.config)).layers)
    if (L.mixer == MixerKind::kMla)
      p.derived_bytes += int64_t(sizeof(float)) * L.attn.num_heads * L.mla.kv_lora_rank *
                         (L.mla.nope_dim + L.mla.v_dim);

  const KvLayout layout = KvLayoutForConfig(p.config);
  p.kv_layers = layout.num_layers;
  for (int64_t w : layout.window) p.kv_sliding_layers += w > 0;
  p.sliding_window = p.kv_sliding_layers > 0 ? p.config.sliding_window : 0;
  p.kv_full_layers = p.kv_layers - p.kv_sliding_layers;
  const int64_t kv_total = KvCacheBytes(layout, opts.kv, opts.context);
  p.recurrent_layers = int64_t(layout.recurrent_floats.size());
  for (int64_t f : layout.recurrent_floats) p.recurrent_state_bytes += f * int64_t(sizeof(float));
  p.kv_bytes_per_token = (kv_total - p.recurrent_state_bytes) / opts.context;
  if (p.kv_sliding_layers > 0) {
    // Sliding-window layers keep only their window (+ one prefill chunk): the cache's own rule.
    KvCacheOptions at_context = opts.kv;
    at_context.max_tokens = opts.context;
    p.kv_sliding_positions = KvLayerSlots(p.sliding_window, at_context);
    KvLayout sliding_only = layout;
    sliding_only.recurrent_floats.clear();
    sliding_only.num_layers = p.kv_sliding_layers;
    sliding_only.window.assign(size_t(p.kv_sliding_layers), p.sliding_window);
    p.kv_sliding_bytes = KvCacheBytes(sliding_only, opts.kv, opts.context);
  }
  p.kv_full_bytes = kv_total - p.kv_sliding_bytes - p.recurrent_state_bytes;

  p.threads =
      opts.threads > 0 ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  if (opts.device == PlanDevice::kCuda) {
    // On the GPU: weights, cache, activations and the CUDA context. The runtime, tokenizer and
    // threads live in host memory.
    const int64_t widest = std::max(
        {p.config.hidden_size, p.config.intermediate_size, p.config.moe_intermediate_size});
    p.reserve_device = kCudaContextBytes + kCudaBlasWorkspaceBytes + kCudaDequantChunkBytes +
                       2 * kModelMaxChunk * widest * int64_t(sizeof(uint16_t));
    p.notes.push_back("--device cuda: host memory (runtime, tokenizer) is not counted");
  } else {
    p.reserve_base = kReserveBase;
    if (opts.with_tokenizer) {
      p.reserve_tokenizer = kTokenizerLiveBytesPerEntry * p.config.vocab_size;
      p.tokenizer_load_transient = kTokenizerTransientBytesPerEntry * p.config.vocab_size;
    }
    p.reserve_threads = kThreadBytes * p.threads;
  }

  if (opts.ram_gb) {
    p.usable_bytes = int64_t(*opts.ram_gb * double(int64_t(1) << 30));
    p.usable_source = "--ram-gb";
  } else if (opts.device == PlanDevice::kCuda) {
    const CudaDeviceInfo dev = QueryCudaDevice();
    p.usable_bytes = dev.free_bytes;
    p.usable_source = fmt::format("free memory of CUDA device {} ({})", dev.device, dev.name);
  } else {
    p.usable_bytes = AvailableRamBytes();
    p.usable_source = "MemAvailable";
    TQ_CHECK(p.usable_bytes > 0, "plan",
             "cannot read MemAvailable from /proc/meminfo; pass --ram-gb");
  }

  p.memory = PlanMemoryAt(p, opts, opts.context, opts.prefill_step);
  p.headroom_bytes = p.usable_bytes - p.memory.peak();
  auto fits = [&](int64_t ctx, int64_t step) {
    return PlanMemoryAt(p, opts, ctx, step).peak() <= p.usable_bytes;
  };
  if (p.headroom_bytes >= 0) {
    p.verdict = PlanVerdict::kFits;
  } else {
    // Contexts below 256 tokens are not worth offering.
    p.max_context = LargestFitting(std::min<int64_t>(256, opts.context), opts.context - 1,
                                   [&](int64_t c) { return fits(c, opts.prefill_step); });
    p.max_prefill_step = LargestFitting(1, std::min(opts.prefill_step, kModelMaxChunk) - 1,
                                        [&](int64_t s) { return fits(opts.context, s); });
    p.verdict = p.max_context > 0 || p.max_prefill_step > 0 ? PlanVerdict::kFitsSmaller
                                                            : PlanVerdict::kDoesNotFit;
  }

  p.moe = p.config.is_moe() && p.expert_bytes > 0;
  if (p.moe) {
    // Streaming (model/expert_cache.h) keeps the non-expert weights and an expert cache of
    // whole-expert slots resident. Recommended cache: everything when the model fits; else the
    // largest cache that leaves 10% of usable memory free, at least the routed experts of one
    // token in every MoE layer (below that every token misses), at most all experts.
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < p.config.num_layers; ++l) moe_layers += p.config.LayerIsMoe(l);
    const int64_t n_experts = std::max<int64_t>(1, moe_layers * p.config.num_experts);
    const int64_t per_expert = p.expert_bytes / n_experts;
    p.streaming_expert_bytes = per_expert;
    p.streaming_min_cache_bytes =
        std::min(p.expert_bytes, p.config.num_experts_per_tok * moe_layers * per_expert);
    const int64_t without = p.memory.peak() - p.expert_bytes;
    const int64_t room = p.usable_bytes - p.usable_bytes / 10 - without;
    int64_t cache = p.verdict == PlanVerdict::kFits
                        ? p.expert_bytes
                        : std::min(p.expert_bytes, std::max<int64_t>(room, 0));
    cache = std::max(cache, p.streaming_min_cache_bytes);
    if (per_expert > 0) cache = cache / per_expert * per_expert;  // whole slots
    p.streaming_cache_bytes = cache;
    p.streaming_resident_fraction = double(cache) / double(std::max<int64_t>(1, p.expert_bytes));
    // Uniform routing: a routed expert is cached with the resident fraction's probability (real
    // routing is skewed: measured hit rates are higher, docs/BENCHMARKS.md).
    p.streaming_miss_bytes_per_token =
        int64_t(double(p.config.num_experts_per_tok * moe_layers) * double(per_expert) *
                (1.0 - p.streaming_resident_fraction));
    p.streaming_peak_bytes = without + p.streaming_cache_bytes;
    p.streaming_fits = p.streaming_peak_bytes <= p.usable_bytes;
  }
  if (p.config.max_position_embeddings > 0 && opts.context > p.config.max_position_embeddings)
    p.notes.push_back(fmt::format("--context {} is beyond the model's max_position_embeddings {}",
                                  opts.context, p.config.max_position_embeddings));
  if (opts.prefill_step > kModelMaxChunk)
    p.notes.push_back(
        fmt::format("prompts run in chunks of at most {} tokens: the workspace of "
                    "--prefill-step {} is that of {}",
                    kModelMaxChunk, opts.prefill_step, kModelMaxChunk));
  if (p.unused_bytes > 0)
    p.notes.push_back(
        fmt::format("{} bytes of tensors are stored but not read (tied lm_head or "
                    "unknown names)",
                    p.unused_bytes));
  return p;
}

}  // namespace tq
