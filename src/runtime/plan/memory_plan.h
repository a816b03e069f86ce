// `turboquant plan`: will a model fit at a context, before it is downloaded or converted? Reads
// config.json and the safetensors headers only (never the weights) and projects the peak memory of
// `generate` / `serve`:
//
//   peak = resident weights + KV cache at the context + prefill workspace + runtime reserve
//
// - weights: as stored (an HF checkpoint, or a TurboQuant checkpoint's actual tensors), or the
//   size after conversion at --bits by the quantization recipe (model/quant_recipe.h). Weights are
//   memory-mapped; what the forward pass reads becomes resident. An untied embedding is a lookup
//   table: only the rows of tokens seen are touched.
// - KV: the cache's own bytes for the context (kv/kv_cache_bytes.h).
// - workspace: the activation buffers of one prefill chunk (model/workspace.h, forward.cc,
//   kernels/cpu/matmul.cc), the logits row.
// - reserve: binary and libraries, the tokenizer, worker threads (calibrated: see memory_model.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/kv_cache.h"
#include "model/quant_recipe.h"

namespace tq {

enum class PlanDevice { kCpu, kCuda };

struct PlanOptions {
  std::string model_dir;
  int64_t context = 16384;  // tokens held in the KV cache; 0 = DefaultContextTokens
  // Project a conversion with this recipe (HF source checkpoints only); nullopt: as stored.
  std::optional<QuantRecipeOptions> recipe;
  // > 0 (with a recipe): convert --budget-bpw X; its decoder linears are projected at the
  // allocator's guarantee, X bits per weight (budget_projection.h): an upper bound.
  double budget_bpw = 0;
  // > 0 (with a recipe): convert --target-size: the whole file is at most this many bytes (the
  // allocator's guarantee), so the weights are projected at it: an upper bound.
  int64_t target_bytes = 0;
  // dtype, compressed-cache settings and max_append (sliding-window layers keep window +
  // max_append positions: kv_cache.h); max_tokens is ignored (the context is).
  KvCacheOptions kv;
  int64_t prefill_step = 512;    // prompt tokens per forward pass
  std::optional<double> ram_gb;  // usable memory; default: this machine's (RAM or GPU)
  PlanDevice device = PlanDevice::kCpu;
  int threads = 0;  // worker threads (0 = all cores)
  // Count the tokenizer (generate, serve); false for `bench`, which loads none.
  bool with_tokenizer = true;
};

// The context every verb uses when none is given (generate, serve, plan, doctor): the model's
// max_position_embeddings, at most 8192 (4096 when the config does not say).
int64_t DefaultContextTokens(int64_t max_position_embeddings);

enum class PlanVerdict { kFits, kFitsSmaller, kDoesNotFit };
const char* PlanVerdictName(PlanVerdict v);  // "fits", "fits_smaller", "does_not_fit"

// Bytes of each part of the peak (all int64 bytes).
struct MemoryBreakdown {
  int64_t weights = 0;    // resident weight bytes
  int64_t kv = 0;         // KV cache at the context
  int64_t workspace = 0;  // prefill activations + logits
  int64_t reserve = 0;    // runtime reserve (sum of the reserve_* below)
  // Heap the tokenizer's parse frees after loading; the workspace's buffers reuse it, so the peak
  // counts the larger of the two.
  int64_t load_transient = 0;
  int64_t peak() const { return weights + kv + reserve + std::max(workspace, load_transient); }
};

struct MemoryPlan {
  // What was planned.
  std::string model_dir;
  ModelConfig config;
  std::string checkpoint_kind;  // "hf" or "turboquant"
  // "turboquant-mlx" when the directory is one (repacked into our format at load); else "".
  std::string source_format;
  std::string weights_source;  // "stored", or the recipe ("projected: turboquant 4-bit g64")
  int64_t context = 0;
  int64_t prefill_step = 0;
  int64_t effective_step = 0;  // rows per forward pass (the model chunks prompts)
  std::string device;          // "cpu" / "cuda"

  // Weights.
  int64_t file_bytes = 0;          // all tensors in the checkpoint, as stored
  int64_t weights_bytes = 0;       // after the projection (or as stored)
  int64_t unused_bytes = 0;        // stored but never read (a tied model's lm_head, unknown names)
  int64_t lookup_table_bytes = 0;  // of weights_bytes: an untied embedding (resident by row)
  int64_t expert_bytes = 0;        // of weights_bytes: MoE expert projections
  // Built at load from stored weights, resident beside them: MLA's absorbed kv_b
  // (model/mla_absorb.h, fp32 [H, kv_lora, nope + v] a layer). In the breakdown's weights.
  int64_t derived_bytes = 0;
  std::vector<std::string> recipe_notes;
  double budget_bpw = 0;                   // > 0: weights_bytes is an upper bound
  int64_t target_bytes = 0;                // > 0: --target-size; weights_bytes is its bound
  int64_t budget_linear_bytes_before = 0;  // decoder linears by the recipe alone
  int64_t budget_linear_bytes_bound = 0;   // at most this after the budget allocator

  // KV cache at the context: full-attention layers hold every position, sliding-window layers
  // min(context, window + kv.max_append) (kv_cache.h).
  int64_t kv_bytes_per_token = 0;  // kv bytes / context (sliding-window layers capped)
  int64_t kv_layers = 0, kv_full_layers = 0, kv_sliding_layers = 0;
  int64_t sliding_window = 0;
  int64_t kv_sliding_positions = 0;  // positions each sliding-window layer keeps
  int64_t kv_full_bytes = 0, kv_sliding_bytes = 0;
  // Recurrent layers (Gated DeltaNet, Mamba-2): a fixed state per sequence, in the KV cache.
  int64_t recurrent_layers = 0, recurrent_state_bytes = 0;

  // Reserve parts.
  int threads = 0;
  int64_t reserve_base = 0, reserve_tokenizer = 0, reserve_threads = 0, reserve_device = 0;
  int64_t tokenizer_load_transient = 0;

  MemoryBreakdown memory;
  int64_t usable_bytes = 0;
  std::string usable_source;   // "MemAvailable", "--ram-gb", "cuda free memory"
  int64_t headroom_bytes = 0;  // usable - peak (negative: short by that much)

  PlanVerdict verdict = PlanVerdict::kDoesNotFit;
  // When the request does not fit: the largest context that fits at this prefill step, and the
  // largest prefill step that fits at this context (0 = none).
  int64_t max_context = 0;
  int64_t max_prefill_step = 0;
  // MoE: expert streaming keeps non-expert weights + an LRU expert cache resident.
  bool moe = false;
  int64_t streaming_cache_bytes = 0;           // the recommended --expert-cache
  int64_t streaming_min_cache_bytes = 0;       // one token's routed experts in every MoE layer
  int64_t streaming_expert_bytes = 0;          // one expert (a cache slot)
  double streaming_resident_fraction = 0;      // of all experts, in the recommended cache
  int64_t streaming_miss_bytes_per_token = 0;  // read from disk per token (uniform routing)
  int64_t streaming_peak_bytes = 0;
  bool streaming_fits = false;
  std::vector<std::string> notes;
};

// Reads `opts.model_dir` (config.json + safetensors headers) and plans. Throws tq::Error for a
// missing or broken directory (naming the file) and tq::UsageError for bad options.
MemoryPlan MakeMemoryPlan(const PlanOptions& opts);

// What a plan reads of a checkpoint, from wherever it came (a directory, or a hub repository over
// HTTP: hub/remote_checkpoint.h). Tensors in Checkpoint::ReadHeaders order.
struct PlanInputs {
  ModelConfig config;
  std::vector<TensorInfo> tensors;
};
// Plans from inputs already read; `opts.model_dir` only names the model in the report.
MemoryPlan MakeMemoryPlan(const PlanOptions& opts, const PlanInputs& inputs);

// The parts, for tests and for `doctor`: the peak of a plan at another context / prefill step.
MemoryBreakdown PlanMemoryAt(const MemoryPlan& plan, const PlanOptions& opts, int64_t context,
                             int64_t prefill_step);

// Bytes of the forward pass's workspace for a prompt chunk of n rows at `threads` kernel threads
// (the `workspace` part of a plan; tests compare it with what the pass allocates).
int64_t ForwardWorkspaceBytes(const ModelConfig& config, int64_t n, int threads);

// The KV geometry Model::kv_layout() will give (window per layer from config + architecture).
KvLayout KvLayoutForConfig(const ModelConfig& config);

}  // namespace tq
