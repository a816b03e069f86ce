// Decoders of the quantized layouts published checkpoints use, to fp32 (convert reads them and
// re-quantizes with TurboQuant):
//  - MXFP4 (OCP microscaling; GPT-OSS experts): "<name>_blocks" uint8 [..., G, 16] holds 32
//    e2m1 values per block (low nibble = even element), "<name>_scales" uint8 [..., G] one e8m0
//    exponent per block (value 2^(s − 127); 0xFF is NaN and rejected);
//  - FP8 E4M3 with block scales (DeepSeek-V3): "weight" F8_E4M3 [rows, cols] and
//    "weight_scale_inv" fp32 [⌈rows/b⌉, ⌈cols/b⌉]; w = fp8 · scale_inv[r/b][c/b], b = 128 by
//    default (quantization_config.weight_block_size).
// Every size is checked before anything is read; errors name the tensor.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace tq {

// The e2m1 value of a 4-bit code (0..15): ±{0, .5, 1, 1.5, 2, 3, 4, 6}.
float E2m1ToF32(uint8_t code);
// The E4M3FN value of a byte (no infinities; 0x7F / 0xFF are NaN).
float E4m3ToF32(uint8_t byte);

// The dequantized shape of an MXFP4 pair: blocks [..., G, 16], scales [..., G] ->
// [..., G · 32]. Throws "[mxfp4 <name>] ..." on mismatched shapes.
Shape Mxfp4Shape(const Shape& blocks, const Shape& scales, const std::string& name);
// blocks/scales as stored -> out (product of Mxfp4Shape floats).
void DequantizeMxfp4(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                     const Shape& blocks_shape, const Shape& scales_shape, const std::string& name,
                     std::span<float> out);

// Checks scale_inv's shape against [⌈rows/block⌉, ⌈cols/block⌉] (throws "[fp8 <name>] ...").
void CheckFp8BlockScales(const Shape& weight, const Shape& scale_inv, int64_t block_rows,
                         int64_t block_cols, const std::string& name);
// weight bytes [rows, cols] E4M3, scale_inv fp32 -> out [rows, cols].
void DequantizeFp8Block(std::span<const uint8_t> weight, std::span<const float> scale_inv,
                        const Shape& weight_shape, const Shape& scale_shape, int64_t block_rows,
                        int64_t block_cols, const std::string& name, std::span<float> out);

}  // namespace tq
