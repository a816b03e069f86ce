// TurboQuant's group quantizer (DESIGN.md §2 steps 3–4) and the matrix-level entry points for it
// and the affine baseline (affine_quantizer.h), for one weight matrix W [rows, cols] (rotate the
// rows first with hadamard.h if wanted), plus the error measure the converter's bit allocator uses.
#pragma once

#include <cstdint>
#include <string_view>

#include "quant/affine_quantizer.h"
#include "quant/codebook.h"
#include "quant/quantized_matrix.h"
#include "quant/vector_codebook.h"

namespace tq::quant {

// One group of n weights, codebook method. Writes n codes and returns the fp16 scale; *sq_error
// (if not null) receives Σ (w - scale * level[code])² with the fp16 scale actually stored.
// kRms: scale = fp16(√(Σw²/n)), codes = nearest level of w / scale. kMseRefined, kMseSearch: see
// ScaleOptions; the lowest-error iterate is returned, so they are never worse than kRms. An
// all-zero group gets scale 0.
uint16_t QuantizeGroup(const float* w, int64_t n, const Codebook& codebook,
                       const ScaleOptions& options, uint8_t* codes, double* sq_error = nullptr);

// One group with an e8 scale (e8_scales.h): returns the table code whose scale gives the lowest
// error among the ±2 codes around the fp16 fit of QuantizeGroup (and code 0), so it is never worse
// than the nearest code to that fit; kRms: the code nearest to the RMS. codes and *sq_error as
// QuantizeGroup, at the table's scale.
uint8_t QuantizeGroupE8(const float* w, int64_t n, const Codebook& codebook,
                        const ScaleOptions& options, const E8ScaleTable& table, uint8_t* codes,
                        double* sq_error = nullptr);

// One group with a d-dimensional codebook (vector method): n (a multiple of d) codes of
// vcb.bits_per_dim bits; the d codes of each vector are the fields of its point index (low field
// first). Scale as QuantizeGroup.
uint16_t QuantizeVectorGroup(const float* w, int64_t n, const VectorCodebook& vcb,
                             const ScaleOptions& options, uint8_t* codes,
                             double* sq_error = nullptr);

// Quantizes W [rows, cols] (row-major) by `spec`; cols must be a multiple of spec.group_size.
// Throws tq::Error "[quantize <name>] ..." on a bad spec or a non-finite weight. Parallel over
// rows (ThreadPool::Global()); the result does not depend on the thread count.
QuantizedMatrix Quantize(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec,
                         std::string_view name = "");

struct QuantError {
  double sq_error = 0.0;  // Σ (w - ŵ)²
  double sq_norm = 0.0;   // Σ w²
  double relative() const { return sq_norm > 0 ? sq_error / sq_norm : 0.0; }
};

// The error Quantize(w, ..., spec) would make, without packing or storing anything.
QuantError QuantizationError(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec,
                             std::string_view name = "");

}  // namespace tq::quant
