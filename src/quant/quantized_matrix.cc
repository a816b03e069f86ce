#include "quant/quantized_matrix.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "quant/packing.h"

namespace tq::quant {

size_t QuantizedMatrix::row_bytes() const { return PackedBytes(format, cols); }

double QuantizedMatrix::BitsPerWeight() const {
  QuantSpec spec;
  spec.method = method;
  spec.format = format;
  spec.group_size = group_size;
  spec.scale_format = e8_scales() ? ScaleFormat::kE8 : ScaleFormat::kF16;
  return quant::BitsPerWeight(spec, cols);
}

float QuantizedMatrix::Scale(int64_t r, int64_t j) const {
  const size_t i = size_t(r * groups_per_row() + j);
  return e8_scales() ? scale_table[scale_codes[i]] : F16ToF32(scales[i]);
}

double ScaleTableBitsPerWeight(ScaleFormat f, int64_t rows, int64_t cols) {
  if (f != ScaleFormat::kE8 || rows <= 0 || cols <= 0) return 0.0;
  return 32.0 * kE8TableSize / (double(rows) * double(cols));
}

double BitsPerWeight(const QuantSpec& spec, int64_t cols) {
  TQ_CHECK(cols > 0 && spec.group_size > 0, "bits per weight", "cols {} / group size {}", cols,
           spec.group_size);
  const double code_bits = 8.0 * double(PackedBytes(spec.format, cols)) / double(cols);
  const double per_group = spec.method == QuantMethod::kAffine     ? 32.0
                           : spec.scale_format == ScaleFormat::kE8 ? 8.0
                                                                   : 16.0;
  return code_bits + per_group / spec.group_size;
}

void QuantizedMatrix::Validate(std::string_view name) const {
  const std::string where = "quantized matrix " + std::string(name);
  TQ_CHECK(rows > 0 && cols > 0, where, "bad shape [{}, {}]", rows, cols);
  TQ_CHECK(group_size > 0 && cols % group_size == 0, where,
           "group size {} does not divide {} columns", group_size, cols);
  TQ_CHECK(codes.size() == size_t(rows) * row_bytes(), where, "{} code bytes, expected {}",
           codes.size(), size_t(rows) * row_bytes());
  const size_t ngroups = size_t(rows) * size_t(groups_per_row());
  if (e8_scales()) {
    TQ_CHECK(method == QuantMethod::kCodebook, where, "e8 scales need the codebook method");
    TQ_CHECK(scales.empty(), where, "both fp16 and e8 scales");
    TQ_CHECK(scale_codes.size() == ngroups, where, "{} e8 scale codes, expected {}",
             scale_codes.size(), ngroups);
    ValidateE8ScaleTable(scale_table.data(), int64_t(scale_table.size()), where);
  } else {
    TQ_CHECK(scales.size() == ngroups, where, "{} scales, expected {}", scales.size(), ngroups);
  }
  if (method == QuantMethod::kAffine) {
    TQ_CHECK(format != CodeFormat::kTernary, where, "affine quantization has no ternary format");
    TQ_CHECK(mins.size() == ngroups, where, "{} mins, expected {}", mins.size(), ngroups);
    TQ_CHECK(codebook.empty(), where, "affine matrix with a codebook");
  } else if (method == QuantMethod::kVector) {
    const int bits = Traits(format).code_bits;
    TQ_CHECK(bits >= 1 && bits <= 4, where, "vector method with format {}", Traits(format).name);
    TQ_CHECK(vector_dim >= 1 && vector_dim <= 8 && bits * vector_dim <= 12 &&
                 group_size % vector_dim == 0,
             where, "vector dimension {} (bits {}, group size {})", vector_dim, bits, group_size);
    TQ_CHECK(mins.empty(), where, "vector matrix with {} mins", mins.size());
    const size_t points = size_t(1) << (bits * vector_dim);
    TQ_CHECK(codebook.size() == points * size_t(vector_dim), where,
             "vector codebook has {} values, expected {} points x {}", codebook.size(), points,
             vector_dim);
  } else {
    TQ_CHECK(vector_dim == 1, where, "vector dimension {} for a scalar method", vector_dim);
    TQ_CHECK(mins.empty(), where, "codebook matrix with {} mins", mins.size());
    TQ_CHECK(int(codebook.size()) == Traits(format).levels, where,
             "codebook has {} levels, format {} needs {}", codebook.size(), Traits(format).name,
             Traits(format).levels);
  }
}

void DequantizeRow(const QuantizedMatrix& q, int64_t row, float* out) {
  TQ_CHECK(row >= 0 && row < q.rows, "dequantize", "row {} out of [0, {})", row, q.rows);
  thread_local std::vector<uint8_t> codes;  // reused: no allocation per row
  codes.resize(size_t(q.cols));
  UnpackCodes(q.format, q.codes.data() + size_t(row) * q.row_bytes(), q.cols, codes.data());
  const int64_t g = q.group_size;
  const uint16_t* scales = q.scales.data() + row * q.groups_per_row();
  if (q.e8_scales()) {
    for (int64_t c = 0; c < q.cols; ++c)
      out[c] = q.Scale(row, c / g) * q.codebook[codes[size_t(c)]];
  } else if (q.method == QuantMethod::kAffine) {
    const uint16_t* mins = q.mins.data() + row * q.groups_per_row();
    for (int64_t c = 0; c < q.cols; ++c)
      out[c] = F16ToF32(mins[c / g]) + F16ToF32(scales[c / g]) * float(codes[size_t(c)]);
  } else if (q.method == QuantMethod::kVector) {
    const int d = q.vector_dim, bits = Traits(q.format).code_bits;
    for (int64_t c = 0; c < q.cols; c += d) {
      size_t p = 0;
      for (int j = 0; j < d; ++j) p |= size_t(codes[size_t(c + j)]) << (bits * j);
      const float s = F16ToF32(scales[c / g]);
      for (int j = 0; j < d; ++j) out[c + j] = s * q.codebook[p * size_t(d) + size_t(j)];
    }
  } else {
    for (int64_t c = 0; c < q.cols; ++c)
      out[c] = F16ToF32(scales[c / g]) * q.codebook[codes[size_t(c)]];
  }
}

void Dequantize(const QuantizedMatrix& q, float* out) {
  q.Validate("");
  ThreadPool::Global().ParallelFor(q.rows, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) DequantizeRow(q, r, out + r * q.cols);
  });
}

}  // namespace tq::quant
