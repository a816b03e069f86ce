#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/error.h"

namespace tq::kernels::cpu {
namespace {

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
// AVX512-BF16 + AMX-TILE + AMX-BF16 in CPUID, and the kernel's permission for this process to
// use the tile data state (asked once; denied on kernels before 5.16 or by policy).
bool AmxUsable() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = (d >> 24) & 1, bf16 = (d >> 22) & 1;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  const bool avx512bf16 = (a >> 5) & 1;
  if (!(tile && bf16 && avx512bf16)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

Isa Detect() {
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
  if (avx512 && AmxUsable()) return Isa::kAmx;
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
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

Isa ParseIsa(std::string_view name) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx})
    if (name == IsaName(i)) return i;
  throw Error(
      "TURBOQUANT_ISA",
      fmt::format("unknown instruction set '{}' (expected scalar, avx2, avx512 or amx)", name));
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
