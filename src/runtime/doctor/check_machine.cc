// doctor: CPU features, the kernel backend, the CUDA device, free memory vs plan's verdict.
#include <algorithm>

#include "core/error.h"
#include "kernels/backend.h"
#include "runtime/doctor/cpu_features.h"
#include "runtime/doctor/doctor_checks.h"
#include "runtime/plan/device_memory.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/plan/plan_report.h"

namespace tq {

void CheckMachine(DoctorState& st) {
  const CpuFeatures cpu = DetectCpuFeatures();
  const std::string names = fmt::format("{}", fmt::join(cpu.Names(), " "));
  const std::string brand = cpu.brand.empty() ? cpu.arch : cpu.brand;
  if (cpu.arch == "x86_64" && !cpu.avx2) {
    st.Add(CheckStatus::kWarn, "cpu",
           fmt::format("{}: no AVX2 ({}): the SIMD kernels run on their portable path, slowly",
                       brand, names.empty() ? "no SIMD extensions" : names));
  } else {
    st.Add(CheckStatus::kOk, "cpu", fmt::format("{}: {}", brand, names));
  }
  try {
    const std::string device = kernels::DefaultDeviceName();
    kernels::Backend& be = kernels::GetBackend(device);
    st.Add(CheckStatus::kOk, "kernels",
           fmt::format("backend {} (device '{}'; --device or $TURBOQUANT_DEVICE = cpu|ref|cuda[:N] "
                       "selects)",
                       be.Describe(), device));
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, "kernels", e.what());
  }
  if (BuiltWithCuda()) {
    try {
      const CudaDeviceInfo d = QueryCudaDevice();
      st.Add(CheckStatus::kOk, "cuda",
             fmt::format("device {} {} (compute {}.{}), driver {}.{}, runtime {}.{}, {} free of {}",
                         d.device, d.name, d.compute_major, d.compute_minor,
                         d.driver_version / 1000, d.driver_version % 1000 / 10,
                         d.runtime_version / 1000, d.runtime_version % 1000 / 10,
                         HumanBytes(d.free_bytes), HumanBytes(d.total_bytes)));
    } catch (const Error& e) {
      // The CPU path still works: a warning, not a failure.
      st.Add(CheckStatus::kWarn, "cuda",
             fmt::format("built with CUDA but no usable device: {}", e.what()));
    }
  } else {
    st.Add(CheckStatus::kOk, "cuda", "not in this build (CPU only; -DTQ_CUDA=ON adds it)");
  }

  if (!st.config || !st.tensors) {
    st.Add(CheckStatus::kWarn, "memory", "skipped: needs config.json and readable weights");
    return;
  }
  PlanOptions po;
  po.model_dir = st.opts.model_dir;
  po.context =
      st.opts.context > 0
          ? st.opts.context
          : std::min<int64_t>(16384, std::max<int64_t>(1, st.config->max_position_embeddings));
  po.ram_gb = st.opts.ram_gb;
  try {
    const MemoryPlan p = MakeMemoryPlan(po);
    const std::string what =
        fmt::format("peak {} at context {} vs {} usable ({}): {}", HumanBytes(p.memory.peak()),
                    p.context, HumanBytes(p.usable_bytes), p.usable_source, VerdictLine(p));
    st.Add(p.verdict == PlanVerdict::kFits          ? CheckStatus::kOk
           : p.verdict == PlanVerdict::kFitsSmaller ? CheckStatus::kWarn
                                                    : CheckStatus::kFail,
           "memory", what);
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, "memory", e.what());
  }
}

}  // namespace tq
