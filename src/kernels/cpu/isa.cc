#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>

#include "core/error.h"

namespace tq::kernels::cpu {
namespace {

Isa Detect() {
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
  if (avx512) return Isa::kAvx512;
  if (avx2) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

Isa FromEnvironment() {
  const Isa best = Detect();
  const char* env = std::getenv("TURBOQUANT_ISA");
  if (env == nullptr || *env == '\0') return best;
  const Isa want = ParseIsa(env);
  return want < best ? want : best;
}

std::atomic<int>& Active() {
  static std::atomic<int> active{int(FromEnvironment())};
  return active;
}

}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Isa ParseIsa(std::string_view name) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (name == IsaName(i)) return i;
  throw Error("TURBOQUANT_ISA",
              fmt::format("unknown instruction set '{}' (expected scalar, avx2 or avx512)", name));
}

Isa DetectedIsa() {
  static const Isa detected = Detect();
  return detected;
}

Isa ActiveIsa() { return Isa(Active().load(std::memory_order_relaxed)); }

Isa SetActiveIsa(Isa isa) {
  const Isa set = isa < DetectedIsa() ? isa : DetectedIsa();
  Active().store(int(set), std::memory_order_relaxed);
  return set;
}

}  // namespace tq::kernels::cpu
