#include "cli/cli_runtime_flags.h"

#include "cli/common_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/expert_cache.h"

namespace tq::cli {

void AddRuntimeFlags(CLI::App& app, RuntimeFlags* flags) {
  app.add_option("--device", flags->device,
                 "Where to run: cpu, ref (the scalar reference kernels), cuda or cuda:N "
                 "(default: $TURBOQUANT_DEVICE, else the GPU when this build has CUDA and one "
                 "is present, else cpu)");
  AddThreadsFlag(app, &flags->threads);
  app.add_option("--kv-dtype", flags->kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}))
      ->capture_default_str();
  AddKvFlags(app, &flags->kv);
  app.add_option("--expert-cache", flags->expert_cache,
                 "MoE models: keep at most SIZE of expert weights in memory (e.g. 4GiB, 512MiB) "
                 "and read the others from the checkpoint on demand (bit-identical results; "
                 "routers, attention and dense layers stay resident; `turboquant plan` "
                 "recommends a size). Default: every expert resident");
  app.add_option("--expert-cache-policy", flags->expert_cache_policy,
                 "which cached expert a miss replaces: lru (least recently used) or lfu (least "
                 "often used, counts halved over time)")
      ->check(CLI::IsMember({"lru", "lfu"}))
      ->capture_default_str();
  app.add_option("--expert-readers", flags->expert_readers,
                 "threads reading the next layer's predicted experts ahead (0: no prefetch)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
}

ModelLoadOptions LoadOptions(const RuntimeFlags& flags) {
  ModelLoadOptions o;
  o.device = flags.device;
  if (!flags.expert_cache.empty())
    o.expert_cache_bytes = ParseByteSize(flags.expert_cache, "--expert-cache");
  o.expert_cache_policy = flags.expert_cache_policy;
  o.expert_readers = flags.expert_readers;
  return o;
}

void ApplyThreads(const RuntimeFlags& flags) {
  ThreadPool::SetGlobalThreads(flags.threads > 0 ? flags.threads : HardwareThreads());
}

KvDType KvDTypeFromFlag(const std::string& name) {
  if (auto t = ParseKvDType(name)) return *t;
  throw UsageError("--kv-dtype", "expected f16, bf16 or f32, got '" + name + "'");
}

void ApplyKvOptions(const RuntimeFlags& flags, KvCacheOptions* kv) {
  kv->dtype = KvDTypeFromFlag(flags.kv_dtype);
  ApplyKvFlags(flags.kv, kv);
}

}  // namespace tq::cli
