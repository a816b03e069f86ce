#include "kernels/packed_ops.h"

#include "core/error.h"
#include "quant/packing.h"

namespace tq::kernels {

void CheckPackedMatrix(const PackedMatrix& w, const char* where) {
  TQ_CHECK(w.rows > 0 && w.cols > 0 && w.group_size > 0 && w.cols % w.group_size == 0, where,
           "packed matrix [{}, {}] with group size {}", w.rows, w.cols, w.group_size);
  TQ_CHECK(w.row_bytes == int64_t(quant::PackedBytes(w.format, w.cols)), where,
           "{} bytes per row for {} {} codes (expected {})", w.row_bytes, w.cols,
           quant::Traits(w.format).name, quant::PackedBytes(w.format, w.cols));
  TQ_CHECK(w.codes && (w.scales != nullptr) != (w.scale_codes != nullptr), where,
           "missing codes, or not exactly one of fp16 scales / e8 scale codes");
  TQ_CHECK(!w.scale_codes || w.scale_table, where, "e8 scale codes without a scale table");
  TQ_CHECK(!w.scale_codes || w.method == quant::QuantMethod::kCodebook, where,
           "e8 scales are for the codebook method only");
  if (w.method == quant::QuantMethod::kAffine) {
    TQ_CHECK(w.mins != nullptr && quant::Traits(w.format).code_bits > 0, where,
             "affine needs minimums and a binary format");
  } else {
    TQ_CHECK(w.method == quant::QuantMethod::kCodebook && w.codebook != nullptr, where,
             "codebook method needs a codebook");
  }
}

void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y) {
  cpu::PackedMatMul(x, n, w, bias, y);
}

void PackedDequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out) {
  cpu::PackedDequantizeRows(w, r0, count, out);
}

}  // namespace tq::kernels
