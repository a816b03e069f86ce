// Run-time instruction-set levels of the cpu backend's hand-written kernels.
//
// The level in use is the best the CPU supports, or the one named by $TURBOQUANT_ISA
// (scalar|avx2|avx512), capped at what the CPU supports; an unknown name is a tq::Error at first
// use. Tests and benchmarks may switch levels with SetActiveIsa (not while kernels run).
//   scalar: no hand-written SIMD kernels (the generic, compiler-vectorised paths).
//   avx2:   AVX2 + FMA + F16C + BMI2 (x86-64-v3).
//   avx512: AVX-512 F/BW/VL/VNNI/VBMI + the avx2 set (Ice Lake, Zen 4 and later).
#pragma once

#include <string_view>

namespace tq::kernels::cpu {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view IsaName(Isa isa);
// Throws tq::Error naming the accepted values for an unknown name.
Isa ParseIsa(std::string_view name);
// The best level this CPU supports.
Isa DetectedIsa();
// The level the kernels use now (first call reads $TURBOQUANT_ISA).
Isa ActiveIsa();
// Sets the level, capped at DetectedIsa(); returns the level actually set.
Isa SetActiveIsa(Isa isa);

}  // namespace tq::kernels::cpu
