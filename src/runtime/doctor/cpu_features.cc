#include "runtime/doctor/cpu_features.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tq {
namespace {

#if defined(__x86_64__) || defined(__i386__)
bool Bit(unsigned reg, int bit) { return (reg >> bit) & 1u; }

// XCR0: which register states the OS saves (a feature the OS does not enable cannot be used).
unsigned long long Xcr0() {
  unsigned int lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
#endif

}  // namespace

std::vector<std::string> CpuFeatures::Names() const {
  std::vector<std::string> n;
  auto add = [&](bool on, const char* name) {
    if (on) n.push_back(name);
  };
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  add(avx_vnni, "AVX-VNNI");
  add(avx512f, "AVX-512F");
  add(avx512bw, "AVX-512BW");
  add(avx512vl, "AVX-512VL");
  add(avx512_vnni, "AVX-512-VNNI");
  add(avx512_bf16, "AVX-512-BF16");
  add(amx_tile, "AMX-TILE");
  add(amx_int8, "AMX-INT8");
  add(amx_bf16, "AMX-BF16");
  add(neon, "NEON");
  return n;
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  f.arch = "x86_64";
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &a, &b, &c, &d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    f.brand = brand;
    const size_t first = f.brand.find_first_not_of(' ');
    f.brand = first == std::string::npos ? "" : f.brand.substr(first);
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = Bit(c, 27);
  const unsigned long long xcr0 = osxsave ? Xcr0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;            // SSE + AVX state
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;   // opmask + ZMM state
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // AMX TILECFG + TILEDATA
  f.fma = ymm && Bit(c, 12);
  f.f16c = ymm && Bit(c, 29);
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = ymm && Bit(b, 5);
    f.avx512f = zmm && Bit(b, 16);
    f.avx512bw = zmm && Bit(b, 30);
    f.avx512vl = zmm && Bit(b, 31);
    f.avx512_vnni = zmm && Bit(c, 11);
    f.amx_bf16 = tiles && Bit(d, 22);
    f.amx_tile = tiles && Bit(d, 24);
    f.amx_int8 = tiles && Bit(d, 25);
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx_vnni = ymm && Bit(a1, 4);
    f.avx512_bf16 = zmm && Bit(a1, 5);
  }
#elif defined(__aarch64__)
  f.arch = "aarch64";
  f.neon = true;  // mandatory in AArch64
#else
  f.arch = "other";
#endif
  return f;
}

}  // namespace tq
