// Flags shared by the verbs that run a model (generate, perplexity, bench, serve):
// --device cpu|ref|cuda[:N], -t/--threads N (default: all cores, $TURBOQUANT_THREADS) and
// --kv-dtype f16|bf16|f32, and MoE expert streaming: --expert-cache SIZE, --expert-cache-policy,
// --expert-readers, and --gpu-memory-limit SIZE (what the engine may hold on the card).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/cli_kv_flags.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace tq::cli {

struct RuntimeFlags {
  std::string
      device;       // "" = $TURBOQUANT_DEVICE, else auto (the GPU when built with CUDA and present)
  int threads = 0;  // 0 = all hardware threads
  std::string kv_dtype = "f16";
  KvFlags kv;  // --kv-bits ... (cli_kv_flags.h); verbs call ApplyKvFlags(rt.kv, &options)
  // "" = plan decides (every expert resident when the model fits in memory, else plan's
  // recommended cache); "all" = every expert resident; else a size ("4GiB").
  std::string expert_cache;
  std::string expert_cache_policy = "lru";  // lru | lfu
  int expert_readers = 2;                   // prefetch reader threads (0: no prefetch)
  std::string gpu_memory_limit;             // "" = the card's memory; else a size ("8GiB")
};

void AddRuntimeFlags(CLI::App& app, RuntimeFlags* flags);
// The model load options the flags select (the device, the expert cache) for `model_dir`. With no
// --expert-cache, an MoE model that does not fit in memory on a host device streams its experts
// with the cache `turboquant plan` recommends (PlannedExpertCache; a line on stderr says so).
// `context`: the tokens the run's KV cache holds (0 = the verbs' default context).
ModelLoadOptions LoadOptions(const RuntimeFlags& flags, const std::string& model_dir,
                             int64_t context = 0);

// The --expert-cache default: plan's recommended cache (bytes) when `model_dir` is an MoE model
// whose plan at `context` tokens (0: the default context) with the flags' KV cache and threads
// does not fit (usable memory on the host: $TURBOQUANT_RAM_GB GiB when set, else MemAvailable;
// on a GPU (`gpu`): --gpu-memory-limit when set, else the card's free memory) and fits with
// streaming; -1 (every expert resident) otherwise, also when the directory cannot be planned
// (loading reports that). `why` gets the reason when >= 0.
int64_t PlannedExpertCache(const RuntimeFlags& flags, const std::string& model_dir, int64_t context,
                           std::string* why, bool gpu = false);
// Sets the global thread pool size.
void ApplyThreads(const RuntimeFlags& flags);
// "f16" | "bf16" | "f32" -> KvDType; tq::UsageError otherwise.
KvDType KvDTypeFromFlag(const std::string& name);
// --kv-dtype and the --kv-* compression flags into `kv` (its max_tokens is left alone).
void ApplyKvOptions(const RuntimeFlags& flags, KvCacheOptions* kv);

}  // namespace tq::cli
