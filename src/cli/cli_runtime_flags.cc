#include "cli/cli_runtime_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/common_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/expert_cache.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/plan/plan_report.h"

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
                 "recommends a size), or 'all'. Default: every expert resident when the model "
                 "fits in memory (MemAvailable, or $TURBOQUANT_RAM_GB GiB), else plan's size");
  app.add_option("--expert-cache-policy", flags->expert_cache_policy,
                 "which cached expert a miss replaces: lru (least recently used) or lfu (least "
                 "often used, counts halved over time)")
      ->check(CLI::IsMember({"lru", "lfu"}))
      ->capture_default_str();
  app.add_option("--gpu-memory-limit", flags->gpu_memory_limit,
                 "GPU runs: the most the engine may hold on the card (weights, KV cache, "
                 "workspace; e.g. 8GiB; the CUDA context and cuBLAS's workspace come on top). A "
                 "MoE model larger than this streams its experts from pinned host memory (see "
                 "--expert-cache); anything else that does not fit is an out-of-memory error "
                 "naming the limit. Default: the card's memory");
  app.add_option("--expert-readers", flags->expert_readers,
                 "threads reading the next layer's predicted experts ahead (0: no prefetch)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
}

int64_t PlannedExpertCache(const RuntimeFlags& flags, const std::string& model_dir, int64_t context,
                           std::string* why, bool gpu) {
  PlanOptions po;
  po.model_dir = model_dir;
  po.device = gpu ? PlanDevice::kCuda : PlanDevice::kCpu;
  po.context = std::max<int64_t>(0, context);  // 0: the verbs' default context
  po.threads = flags.threads;
  try {
    ApplyKvOptions(flags, &po.kv);
  } catch (const Error&) {
    return -1;  // the verb reports its bad KV flags
  }
  const char* env = gpu ? nullptr : std::getenv("TURBOQUANT_RAM_GB");
  const char* source = env && *env ? "$TURBOQUANT_RAM_GB" : nullptr;
  if (gpu && !flags.gpu_memory_limit.empty()) {
    po.ram_gb = double(ParseByteSize(flags.gpu_memory_limit, "--gpu-memory-limit")) /
                double(int64_t(1) << 30);
    source = "--gpu-memory-limit";
  }
  if (env && *env) {
    char* end = nullptr;
    const double gb = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(gb > 0))
      throw UsageError("$TURBOQUANT_RAM_GB", fmt::format("expected GiB > 0, got '{}'", env));
    po.ram_gb = gb;
  }
  MemoryPlan p;
  try {
    p = MakeMemoryPlan(po);
  } catch (const Error&) {
    return -1;  // Model::Load reports what is wrong with the directory
  }
  if (!p.moe || p.verdict == PlanVerdict::kFits || !p.streaming_fits) return -1;
  if (why)
    *why = fmt::format(
        "the model needs {} at context {} but {} is usable ({}): streaming experts with "
        "--expert-cache {}MiB ({:.0f}% of experts resident), as `turboquant plan` recommends; "
        "--expert-cache all keeps every expert resident",
        HumanBytes(p.memory.peak()), p.context, HumanBytes(p.usable_bytes),
        source ? source : p.usable_source.c_str(), p.streaming_cache_bytes >> 20,
        100.0 * p.streaming_resident_fraction);
  return p.streaming_cache_bytes;
}

ModelLoadOptions LoadOptions(const RuntimeFlags& flags, const std::string& model_dir,
                             int64_t context) {
  ModelLoadOptions o;
  o.device = flags.device;
  if (!flags.gpu_memory_limit.empty()) {
    o.device_memory_limit = ParseByteSize(flags.gpu_memory_limit, "--gpu-memory-limit");
    if (o.device_memory_limit <= 0)
      throw UsageError("--gpu-memory-limit", "must be more than 0 bytes");
  }
  o.expert_cache_policy = flags.expert_cache_policy;
  o.expert_readers = flags.expert_readers;
  if (flags.expert_cache == "all") return o;
  if (!flags.expert_cache.empty()) {
    o.expert_cache_bytes = ParseByteSize(flags.expert_cache, "--expert-cache");
    return o;
  }
  bool host = false;
  try {
    host = kernels::GetBackend(flags.device.empty() ? kernels::DefaultDeviceName() : flags.device)
               .memory_space() == MemorySpace::kHost;
  } catch (const Error&) {
    return o;  // Model::Load names the device problem
  }
  std::string why;
  o.expert_cache_bytes = PlannedExpertCache(flags, model_dir, context, &why, !host);
  if (o.expert_cache_bytes >= 0) std::fprintf(stderr, "[expert cache] %s\n", why.c_str());
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
