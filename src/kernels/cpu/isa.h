// Run-time instruction-set levels of the cpu backend's hand-written kernels.
//
// The level in use is the best the CPU supports, or the one named by $TURBOQUANT_ISA
// (scalar|avx2|avx512|amx), capped at what the CPU supports; an unknown name is a tq::Error at
// first use. Tests and benchmarks may switch levels with SetActiveIsa (not while kernels run).
//   scalar: no hand-written SIMD kernels (the generic, compiler-vectorised paths).
//   avx2:   AVX2 + FMA + F16C + BMI2 (x86-64-v3).
//   avx512: AVX-512 F/BW/VL/VNNI/VBMI + the avx2 set (Ice Lake, Zen 4 and later).
//   amx:    avx512 + AVX512-BF16 + AMX-TILE/AMX-BF16 (Sapphire Rapids and later), and the kernel
//           granted this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16);
//           many-token matmuls (prefill) then run on AMX tiles (cpu/amx_gemm.h).
#pragma once

#include <string_view>

namespace tq::kernels::cpu {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

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
