// Matrix products on TurboQuant packed weights (docs/FORMAT.md): codes + fp16 group scales (+ fp16
// minimums for the affine baseline) + a per-tensor codebook. The input is assumed already rotated
// (the caller rotates once per sharing group); these kernels only see codes and scales.
//
// Dispatch follows the active table (backend.h): `ref` runs the scalar oracle
// (ref/packed_matmul_ref.cc), anything else the cpu path (cpu/packed_matmul.cc).
#pragma once

#include <cstdint>

#include "core/half.h"
#include "quant/format.h"
#include "quant/quantized_matrix.h"

namespace tq::kernels {

// A non-owning view of one packed weight matrix W [rows = out, cols = in].
struct PackedMatrix {
  quant::QuantMethod method = quant::QuantMethod::kCodebook;  // kCodebook or kAffine
  quant::CodeFormat format = quant::CodeFormat::kQ4;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t group_size = 0;          // divides cols
  const uint8_t* codes = nullptr;  // [rows, row_bytes]: each row packed on its own
  int64_t row_bytes = 0;           // quant::PackedBytes(format, cols)
  // Group scales, one of two encodings (docs/FORMAT.md "Group scales"):
  const uint16_t* scales = nullptr;      // fp16 [rows, cols / group_size], or
  const uint8_t* scale_codes = nullptr;  // e8 [rows, cols / group_size]: scale = scale_table[code]
  const float* scale_table = nullptr;    // [256], with scale_codes (a per-tensor log grid)
  const uint16_t* mins = nullptr;        // fp16 [rows, cols / group_size], affine only
  const float* codebook = nullptr;       // [levels], codebook method only
  // > 0: format q8 with the linear codebook, level c = (c - 128) · linear_q8_step
  // (quant::IsLinearQ8Levels), set where the codebook is on the host (PackedLinear), so that a
  // backend whose copy of the codebook is device memory knows it (0: not known to be linear).
  float linear_q8_step = 0.0f;

  bool e8_scales() const { return scale_codes != nullptr; }
  // Where the stored scale of flat group i (row · groups + group) starts, and the bytes of one
  // stored scale, whichever the encoding (for prefetching a block of rows' scales).
  const void* ScaleStorage(int64_t i) const {
    return scale_codes ? static_cast<const void*>(scale_codes + i)
                       : static_cast<const void*>(scales + i);
  }
  int64_t ScaleStorageBytes() const { return scale_codes ? 1 : 2; }
  // The scale of group j of row r (fp32), whichever the encoding.
  float Scale(int64_t r, int64_t j) const {
    const int64_t i = r * (cols / group_size) + j;
    return scale_codes ? scale_table[scale_codes[i]] : F16ToF32(scales[i]);
  }
};

// Throws tq::Error naming `where` when the view is inconsistent (null pointers, sizes).
void CheckPackedMatrix(const PackedMatrix& w, const char* where);

// y [n, rows] = x [n, cols] · Ŵᵀ (+ bias[rows] when not null), Ŵ the dequantized matrix.
// y must not alias x.
void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);

// out [count, cols] = rows r0 .. r0+count-1 of Ŵ.
void PackedDequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out);

namespace ref {
void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);
void PackedDequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out);
}  // namespace ref

namespace cpu {
void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y);
void PackedDequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out);
}  // namespace cpu

}  // namespace tq::kernels
