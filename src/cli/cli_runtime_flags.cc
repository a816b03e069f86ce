#include "cli/cli_runtime_flags.h"

#include "core/error.h"
#include "core/thread_pool.h"

namespace tq::cli {

void AddRuntimeFlags(CLI::App& app, RuntimeFlags* flags) {
  app.add_option("--device", flags->device,
                 "Where to run: cpu, ref (the scalar reference kernels), cuda or cuda:N "
                 "(default: $TURBOQUANT_DEVICE, else the GPU when this build has CUDA and one "
                 "is present, else cpu)");
  app.add_option("--threads", flags->threads, "CPU threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-dtype", flags->kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}))
      ->capture_default_str();
  AddKvFlags(app, &flags->kv);
}

ModelLoadOptions LoadOptions(const RuntimeFlags& flags) {
  ModelLoadOptions o;
  o.device = flags.device;
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
