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

}  // namespace tq::kernels::cuda
