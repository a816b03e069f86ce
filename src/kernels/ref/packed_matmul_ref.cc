// Scalar oracle for packed-weight products: unpack a row's codes with the quant/ reference
// (packing.h), dequantize it (scale · level, or min + scale · code), dot it with every token.
#include <vector>

#include "core/half.h"
#include "kernels/packed_ops.h"
#include "quant/packing.h"

namespace tq::kernels::ref {

void PackedDequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out) {
  std::vector<uint8_t> codes(size_t(w.cols));
  const int64_t groups = w.cols / w.group_size;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t r = r0 + i;
    quant::UnpackCodes(w.format, w.codes + r * w.row_bytes, w.cols, codes.data());
    float* dst = out + i * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) {
      const int64_t g = r * groups + c / w.group_size;
      const float scale = w.Scale(r, c / w.group_size);
      if (w.method == quant::QuantMethod::kAffine) {
        dst[c] = F16ToF32(w.mins[g]) + scale * float(codes[size_t(c)]);
      } else {
        dst[c] = scale * w.codebook[codes[size_t(c)]];
      }
    }
  }
}

void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y) {
  std::vector<float> row(size_t(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    ref::PackedDequantizeRows(w, r, 1, row.data());
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0.0;
      const float* xt = x + t * w.cols;
      for (int64_t c = 0; c < w.cols; ++c) acc += double(xt[c]) * double(row[size_t(c)]);
      y[t * w.rows + r] = float(acc) + (bias ? bias[r] : 0.0f);
    }
  }
}

}  // namespace tq::kernels::ref
