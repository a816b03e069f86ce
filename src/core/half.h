// IEEE fp16 and bfloat16 <-> fp32 conversion. Scalar inline versions here (exact, round to
// nearest even); bulk versions in half.cc use F16C when the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tq {

inline float Bf16ToF32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, overflow to inf, NaN preserved.
inline uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (absu >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (absu < 0x38800000u) {                        // subnormal or zero in fp16
    if (absu < 0x33000000u) return sign;           // < 2^-25 rounds to 0
    const uint32_t e = absu >> 23;
    const uint32_t m = (absu & 0x7fffffu) | 0x800000u;
    // value = m * 2^(e-150) and the fp16 subnormal unit is 2^-24, so code = m >> (126 - e).
    const uint32_t s = 126 - e;
    uint32_t code = m >> s;
    const uint32_t rem = m & ((1u << s) - 1);
    const uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (code & 1u))) ++code;
    return sign | uint16_t(code);
  }
  uint32_t v = absu + 0xfffu + ((absu >> 13) & 1u);  // round mantissa to 10 bits
  v -= (127u - 15u) << 23;
  return sign | uint16_t(v >> 13);
}

// Bulk conversions (n elements).
void Bf16ToF32(const uint16_t* src, float* dst, size_t n);
void F16ToF32(const uint16_t* src, float* dst, size_t n);
void F32ToBf16(const float* src, uint16_t* dst, size_t n);
void F32ToF16(const float* src, uint16_t* dst, size_t n);

}  // namespace tq
