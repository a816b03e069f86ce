// Affine round-to-nearest group quantization: the baseline of the quality table ("--method
// affine"), not TurboQuant. Effective bits per weight = bits + 32 / group (fp16 scale + fp16 min).
#pragma once

#include <cstdint>

namespace tq::quant {

// One group, affine round-to-nearest with 2^bits levels: min = fp16(min w),
// scale = fp16((max w - min) / (2^bits - 1)), code = clamp(round((w - min) / scale)).
void QuantizeAffineGroup(const float* w, int64_t n, int bits, uint16_t* scale, uint16_t* min,
                         uint8_t* codes, double* sq_error = nullptr);

}  // namespace tq::quant
