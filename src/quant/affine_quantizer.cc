#include "quant/affine_quantizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/half.h"

namespace tq::quant {

void QuantizeAffineGroup(const float* w, int64_t n, int bits, uint16_t* scale, uint16_t* min,
                         uint8_t* codes, double* sq_error) {
  TQ_CHECK(bits >= 1 && bits <= 8, "quantize affine", "bits {} outside 1..8", bits);
  const int qmax = (1 << bits) - 1;
  float lo = n > 0 ? w[0] : 0.0f, hi = lo;
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  *min = F32ToF16(lo);
  *scale = F32ToF16(float((double(hi) - double(lo)) / qmax));
  TQ_CHECK(std::isfinite(F16ToF32(*min)) && std::isfinite(F16ToF32(*scale)),
           "quantize affine group", "range [{}, {}] overflows fp16", lo, hi);
  const float m = F16ToF32(*min), s = F16ToF32(*scale);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  double err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int q = std::clamp(int(std::lround((w[i] - m) * inv)), 0, qmax);
    codes[i] = uint8_t(q);
    const double d = double(w[i]) - (double(m) + double(s) * q);
    err += d * d;
  }
  if (sq_error) *sq_error = err;
}

}  // namespace tq::quant
