// One packed code by index, for the CUDA kernels and (the same source) for the host tests that
// check it against quant::UnpackCodes without a GPU (tests/kernels/cuda_code_at_test.cc). No
// CUDA header: under nvcc the functions are __host__ __device__, elsewhere plain inline.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TQ_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TQ_HOST_DEVICE inline
#endif

namespace tq::kernels::cuda {

// Code formats (quant::CodeFormat values, same numbering).
enum : int { kQ1 = 0, kQ2 = 1, kQ3 = 2, kQ4 = 3, kQ8 = 4, kTernary = 5 };

// Code c (0 <= c < n) of a row of n codes packed in `format` (quant/packing.h, format.h):
// binary formats in 32-code units (unit u = c / 32, position j = c % 32):
//   q1 bit j of the unit's 4 bytes; q2 byte j % 8, bits 2 (j / 8); q3 that 2-bit plane then bit j
//   of a 4-byte plane; q4 byte j % 16, nibble j / 16; q8 byte j;
// ternary in 160-trit chunks of B = ceil(m / 5) bytes (m the chunk's trits, 160 but for the
// last), byte i % B holding trit i at digit k = i / B: t_k = ((uint8)(q · 3^k) · 3) >> 8.
TQ_HOST_DEVICE int CodeAt(int format, const uint8_t* row, int64_t c, int64_t n) {
  const int64_t u = c >> 5;
  const int j = int(c & 31);
  switch (format) {
    case kQ1:
      return (row[u * 4 + (j >> 3)] >> (j & 7)) & 1;
    case kQ2:
      return (row[u * 8 + (j & 7)] >> (2 * (j >> 3))) & 3;
    case kQ3: {
      const int lo = (row[u * 12 + (j & 7)] >> (2 * (j >> 3))) & 3;
      const int hi = (row[u * 12 + 8 + (j >> 3)] >> (j & 7)) & 1;
      return lo | hi << 2;
    }
    case kQ4:
      return (row[u * 16 + (j & 15)] >> (4 * (j >> 4))) & 15;
    case kQ8:
      return row[c];
    default: {  // ternary
      const int64_t chunk = c / 160;
      const int i = int(c - chunk * 160);
      const int64_t left = n - chunk * 160;
      const int m = left < 160 ? int(left) : 160;
      const int b = (m + 4) / 5;
      const unsigned q = row[chunk * 32 + i % b];
      const int k = i / b;
      const unsigned pow3 = k == 0 ? 1u : k == 1 ? 3u : k == 2 ? 9u : k == 3 ? 27u : 81u;
      return int((unsigned(uint8_t(q * pow3)) * 3u) >> 8);
    }
  }
}

// Byte k of one packed 32-code unit (binary formats; the inverse of CodeAt, quant::PackCodes's
// layout) from codes c[0 .. avail) of the unit; codes at avail and past it are 0 (a row's last,
// partial unit). k < the format's bytes per unit (4, 8, 12, 16, 32).
TQ_HOST_DEVICE int PackedUnitByte(int format, const uint8_t* c, int avail, int k) {
  auto at = [&](int j) { return j < avail ? int(c[j]) : 0; };
  switch (format) {
    case kQ1: {
      int b = 0;
      for (int i = 0; i < 8; ++i) b |= (at(8 * k + i) & 1) << i;
      return b;
    }
    case kQ2:
      return at(k) | at(k + 8) << 2 | at(k + 16) << 4 | at(k + 24) << 6;
    case kQ3: {
      if (k < 8)
        return (at(k) & 3) | (at(k + 8) & 3) << 2 | (at(k + 16) & 3) << 4 | (at(k + 24) & 3) << 6;
      int b = 0;
      for (int i = 0; i < 8; ++i) b |= (at(8 * (k - 8) + i) >> 2 & 1) << i;
      return b;
    }
    case kQ4:
      return at(k) | at(k + 16) << 4;
    default:  // q8
      return at(k);
  }
}

// Bytes of one 32-code unit of a binary format.
TQ_HOST_DEVICE int UnitBytes(int format) {
  return format == kQ1 ? 4 : format == kQ2 ? 8 : format == kQ3 ? 12 : format == kQ4 ? 16 : 32;
}

}  // namespace tq::kernels::cuda
