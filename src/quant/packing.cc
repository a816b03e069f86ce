#include "quant/packing.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace tq::quant {
namespace {

constexpr int64_t kUnit = 32;  // codes per unit of the binary formats

void CheckCodes(CodeFormat f, const uint8_t* codes, int64_t n) {
  const int levels = Traits(f).levels;
  if (levels >= 256) return;
  for (int64_t i = 0; i < n; ++i) {
    TQ_CHECK(codes[i] < levels, "pack " + std::string(Traits(f).name),
             "code {} at index {} is out of range (levels {})", codes[i], i, levels);
  }
}

// One 32-code unit c[0..31] (already zero-padded) -> bytes.
void PackUnit(CodeFormat f, const uint8_t* c, uint8_t* out) {
  switch (f) {
    case CodeFormat::kQ1: {
      uint32_t w = 0;
      for (int j = 0; j < 32; ++j) w |= uint32_t(c[j] & 1) << j;
      for (int b = 0; b < 4; ++b) out[b] = uint8_t(w >> (8 * b));
      return;
    }
    case CodeFormat::kQ2:
      for (int j = 0; j < 8; ++j)
        out[j] = uint8_t(c[j] | c[j + 8] << 2 | c[j + 16] << 4 | c[j + 24] << 6);
      return;
    case CodeFormat::kQ3: {
      uint32_t hi = 0;
      for (int j = 0; j < 8; ++j)
        out[j] =
            uint8_t((c[j] & 3) | (c[j + 8] & 3) << 2 | (c[j + 16] & 3) << 4 | (c[j + 24] & 3) << 6);
      for (int j = 0; j < 32; ++j) hi |= uint32_t(c[j] >> 2 & 1) << j;
      for (int b = 0; b < 4; ++b) out[8 + b] = uint8_t(hi >> (8 * b));
      return;
    }
    case CodeFormat::kQ4:
      for (int j = 0; j < 16; ++j) out[j] = uint8_t(c[j] | c[j + 16] << 4);
      return;
    case CodeFormat::kQ8:
      std::memcpy(out, c, 32);
      return;
    case CodeFormat::kTernary:
      break;
  }
  Fail("pack", "not a 32-code unit format");
}

void UnpackUnit(CodeFormat f, const uint8_t* in, uint8_t* c) {
  switch (f) {
    case CodeFormat::kQ1: {
      const uint32_t w =
          uint32_t(in[0]) | uint32_t(in[1]) << 8 | uint32_t(in[2]) << 16 | uint32_t(in[3]) << 24;
      for (int j = 0; j < 32; ++j) c[j] = uint8_t(w >> j & 1);
      return;
    }
    case CodeFormat::kQ2:
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 8; ++j) c[8 * k + j] = uint8_t(in[j] >> (2 * k) & 3);
      return;
    case CodeFormat::kQ3: {
      const uint32_t hi =
          uint32_t(in[8]) | uint32_t(in[9]) << 8 | uint32_t(in[10]) << 16 | uint32_t(in[11]) << 24;
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 8; ++j) c[8 * k + j] = uint8_t(in[j] >> (2 * k) & 3);
      for (int j = 0; j < 32; ++j) c[j] |= uint8_t((hi >> j & 1) << 2);
      return;
    }
    case CodeFormat::kQ4:
      for (int j = 0; j < 16; ++j) {
        c[j] = in[j] & 15;
        c[j + 16] = in[j] >> 4;
      }
      return;
    case CodeFormat::kQ8:
      std::memcpy(c, in, 32);
      return;
    case CodeFormat::kTernary:
      break;
  }
  Fail("unpack", "not a 32-code unit format");
}

constexpr int64_t kTritChunk = 160;

}  // namespace

uint8_t PackTrits5(const uint8_t t[5]) {
  const unsigned v = 81u * t[0] + 27u * t[1] + 9u * t[2] + 3u * t[3] + t[4];
  return uint8_t((v * 256u + 242u) / 243u);
}

void UnpackTrits5(uint8_t q, uint8_t t[5]) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  for (int k = 0; k < 5; ++k) t[k] = uint8_t((unsigned(uint8_t(q * kPow3[k])) * 3u) >> 8);
}

size_t PackedBytes(CodeFormat f, int64_t n) {
  TQ_CHECK(n >= 0, "pack", "negative code count {}", n);
  if (f == CodeFormat::kTernary) return size_t((n + 4) / 5);
  return size_t((n + kUnit - 1) / kUnit) * size_t(Traits(f).bytes_per_unit);
}

void PackCodes(CodeFormat f, const uint8_t* codes, int64_t n, uint8_t* out) {
  CheckCodes(f, codes, n);
  if (f == CodeFormat::kTernary) {
    for (int64_t c0 = 0; c0 < n; c0 += kTritChunk) {
      const int64_t m = std::min(kTritChunk, n - c0);
      const int64_t b = (m + 4) / 5;
      for (int64_t j = 0; j < b; ++j) {
        uint8_t t[5];
        for (int k = 0; k < 5; ++k) {
          const int64_t i = j + k * b;
          t[k] = i < m ? codes[c0 + i] : 0;
        }
        *out++ = PackTrits5(t);
      }
    }
    return;
  }
  const int bytes = Traits(f).bytes_per_unit;
  uint8_t unit[kUnit];
  for (int64_t u0 = 0; u0 < n; u0 += kUnit) {
    const int64_t m = std::min(kUnit, n - u0);
    std::memcpy(unit, codes + u0, size_t(m));
    std::memset(unit + m, 0, size_t(kUnit - m));
    PackUnit(f, unit, out);
    out += bytes;
  }
}

void UnpackCodes(CodeFormat f, const uint8_t* packed, int64_t n, uint8_t* codes) {
  if (f == CodeFormat::kTernary) {
    for (int64_t c0 = 0; c0 < n; c0 += kTritChunk) {
      const int64_t m = std::min(kTritChunk, n - c0);
      const int64_t b = (m + 4) / 5;
      for (int64_t j = 0; j < b; ++j) {
        uint8_t t[5];
        UnpackTrits5(*packed++, t);
        for (int k = 0; k < 5; ++k) {
          const int64_t i = j + k * b;
          if (i < m) codes[c0 + i] = t[k];
        }
      }
    }
    return;
  }
  const int bytes = Traits(f).bytes_per_unit;
  uint8_t unit[kUnit];
  for (int64_t u0 = 0; u0 < n; u0 += kUnit) {
    const int64_t m = std::min(kUnit, n - u0);
    UnpackUnit(f, packed, unit);
    std::memcpy(codes + u0, unit, size_t(m));
    packed += bytes;
  }
}

}  // namespace tq::quant
