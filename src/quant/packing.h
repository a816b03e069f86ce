// Dense packing of quantizer codes (code values 0 .. levels-1) into bytes, one row at a time.
//
// Binary formats (q1, q2, q3, q4, q8) pack 32 consecutive codes c[0..31] per unit, in "plane"
// order so that SIMD and CUDA decode a unit with shifts and masks into runs of consecutive codes
// (layouts in format.h and docs/FORMAT.md). A row of n codes takes ceil(n/32) units; the codes
// past n in the last unit are 0.
//
// Ternary (base 3): chunks of up to 160 trits. A chunk of m trits uses B = ceil(m/5) bytes (B = 32
// for a full chunk); byte j holds t[j + k*B] for k = 0..4 (0 where j + k*B >= m) as
//   V = 81 t0 + 27 t1 + 9 t2 + 3 t3 + t4 (0..242), stored as q = ceil(256 V / 243) (0..255),
// a base-3 fraction that decodes without division: t_k = ((uint8_t)(q * 3^k) * 3) >> 8.
// A row of n trits takes exactly ceil(n/5) bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.h"

namespace tq::quant {

// Bytes of one packed row of n codes.
size_t PackedBytes(CodeFormat f, int64_t n);

// Packs n codes into PackedBytes(f, n) bytes at `out` (every byte written). Throws tq::Error
// naming the format and index if a code is >= the format's level count.
void PackCodes(CodeFormat f, const uint8_t* codes, int64_t n, uint8_t* out);

// Unpacks n codes from `packed` (PackedBytes(f, n) bytes). Never reads past that size.
void UnpackCodes(CodeFormat f, const uint8_t* packed, int64_t n, uint8_t* codes);

// Ternary byte <-> 5 trits (t[0] is the most significant base-3 digit).
uint8_t PackTrits5(const uint8_t t[5]);
void UnpackTrits5(uint8_t q, uint8_t t[5]);

}  // namespace tq::quant
