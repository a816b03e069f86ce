// A quantized weight matrix W [rows = out, cols = in] and its scalar reference dequantizer.
//
// Codes are grouped along `cols` in groups of `group_size` consecutive columns; each group has one
// scale — fp16, or (codebook method, ScaleFormat::kE8) a byte indexing a per-tensor table of 256
// fp32 scales (e8_scales.h) — and, for the affine method, one fp16 minimum:
//   codebook method: w[r, c] ≈ scale[r, c / g] * codebook[code[r, c]]
//   affine method:   w[r, c] ≈ min[r, c / g] + scale[r, c / g] * code[r, c]
//   vector method:   the codes of columns c .. c+d-1 (c % d == 0, b bits each) are the fields of
//                    one index p = Σ_j code[r, c+j] << (b·j) into a d-dimensional codebook, and
//                    w[r, c+j] ≈ scale[r, c / g] * points[p][j]   (experimental, see below)
// Each row's codes are packed on their own (packing.h): row r starts at byte r * row_bytes().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "quant/codebook.h"
#include "quant/e8_scales.h"
#include "quant/format.h"
#include "quant/vector_codebook.h"

namespace tq::quant {

enum class QuantMethod : uint8_t {
  kCodebook = 0,  // TurboQuant: per-group scale x Lloyd-Max level
  kAffine = 1,    // round-to-nearest on a uniform grid between the group's min and max
  kVector = 2,    // per-group scale x a point of a d-dimensional codebook (vector_codebook.h)
};

enum class ScaleMode : uint8_t {
  kRms = 0,         // scale = RMS of the group
  kMseRefined = 1,  // start from RMS, then alternate assign <-> scale = <w,c>/<c,c> (best kept)
  kMseSearch = 2,   // kMseRefined from RMS and from RMS·f for a grid of f (best kept)
};

// How a group's scale is fitted (codebook and vector methods).
struct ScaleOptions {
  ScaleMode mode = ScaleMode::kMseSearch;
  int refine_rounds = 2;  // alternations per start (kMseRefined, kMseSearch)
  // kMseSearch starts: f = search_lo + (search_hi - search_lo) · k / (search_steps - 1).
  int search_steps = 9;
  float search_lo = 0.7f;
  float search_hi = 1.3f;
  // A start is refined only if its first error is within this factor of the best so far (1.15
  // loses < 0.2% of the search's gain on Gaussian data and runs 1.75x faster than no pruning).
  float search_prune = 1.15f;
};

// What to quantize to. The affine method uses binary formats only and ignores scale/codebook.
struct QuantSpec {
  QuantMethod method = QuantMethod::kCodebook;
  CodeFormat format = CodeFormat::kQ4;
  int group_size = 64;
  ScaleOptions scale;
  // Levels to snap to (codebook method); nullptr = GaussianCodebook(format). Its size must equal
  // the format's level count. Must outlive the call.
  const Codebook* codebook = nullptr;
  // The vector method's codebook (required for it): bits_per_dim must equal the format's bits
  // and dim must divide group_size. Must outlive the call.
  const VectorCodebook* vector_codebook = nullptr;
  // kE8: each group's scale is the table value (codebook method only) that gives the lowest error
  // (kRms: the one nearest to the RMS). The table: e8_table, or (nullptr) E8ScaleTableFor(w).
  // Must outlive the call.
  ScaleFormat scale_format = ScaleFormat::kF16;
  const E8ScaleTable* e8_table = nullptr;
};

struct QuantizedMatrix {
  QuantMethod method = QuantMethod::kCodebook;
  CodeFormat format = CodeFormat::kQ4;
  int64_t rows = 0;
  int64_t cols = 0;
  int group_size = 0;
  std::vector<uint8_t> codes;    // [rows, row_bytes()]
  std::vector<uint16_t> scales;  // fp16 [rows, groups_per_row()] (empty with e8 scales)
  // e8 scales (scale_format kE8): codes [rows, groups_per_row()] into scale_table [256].
  std::vector<uint8_t> scale_codes;
  std::vector<float> scale_table;
  std::vector<uint16_t> mins;  // fp16 [rows, groups_per_row()], affine only (else empty)
  // Codebook method: the levels used, ascending [levels]. Vector method: the points
  // [2^(bits * vector_dim), vector_dim]. Affine: empty.
  std::vector<float> codebook;
  int vector_dim = 1;  // d of the vector method (1 otherwise)

  size_t row_bytes() const;
  int64_t groups_per_row() const { return group_size > 0 ? cols / group_size : 0; }
  bool e8_scales() const { return !scale_codes.empty() || !scale_table.empty(); }
  // The scale of group j of row r (fp32), whichever the encoding.
  float Scale(int64_t r, int64_t j) const;
  // Stored bits per weight: packed codes + group scales (+ fp16 mins); the codebook and the e8
  // scale table are per tensor (ScaleTableBitsPerWeight).
  double BitsPerWeight() const;
  // Throws tq::Error naming `name` if sizes are inconsistent (what a loader checks).
  void Validate(std::string_view name) const;
};

// Bits per weight of a spec on rows of `cols` weights (codes + group scales + mins).
double BitsPerWeight(const QuantSpec& spec, int64_t cols);
// Bits per weight of scale format f's per-tensor table on a [rows, cols] matrix (e8: 256 fp32
// values; f16: 0).
double ScaleTableBitsPerWeight(ScaleFormat f, int64_t rows, int64_t cols);

// out [rows, cols] = the dequantized matrix (scalar reference).
void Dequantize(const QuantizedMatrix& q, float* out);
// out [cols] = row `row` (q must have passed Validate: codes index the codebook unchecked).
void DequantizeRow(const QuantizedMatrix& q, int64_t row, float* out);

}  // namespace tq::quant
