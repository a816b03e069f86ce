// What this CPU offers the kernels (x86-64: cpuid leaf 1 and 7, and the OS's XSAVE state; ARM:
// what the compiler was told).
#pragma once

#include <string>
#include <vector>

namespace tq {

struct CpuFeatures {
  std::string arch;   // "x86_64", "aarch64", ...
  std::string brand;  // cpuid brand string ("" when unknown)
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_vnni = false,
       avx512_bf16 = false;
  bool avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool neon = false;
  // The names of the features present, e.g. {"AVX2", "FMA", "AVX-512F", "AMX-BF16"}.
  std::vector<std::string> Names() const;
};

CpuFeatures DetectCpuFeatures();

}  // namespace tq
