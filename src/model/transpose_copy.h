// The rearranging copy behind gpt_oss's published experts: an expert's fused slab [in, W]
// (y = x · W + b, gate and up interleaved along W) into one projection's [out, in] matrix.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tq {

// dst [rows, cols] with dst[o, i] = src[i · stride + o · step + offset], elements of `es` bytes
// (2 or 4 take a typed path; others go byte by byte). In 64 × 64 tiles so that both sides stay
// in cache: ~10x an element-by-element loop on a 2880 × 5760 bf16 slab.
void TransposeCopy(const uint8_t* src, int64_t stride, int64_t step, int64_t offset, int64_t rows,
                   int64_t cols, size_t es, uint8_t* dst);

}  // namespace tq
