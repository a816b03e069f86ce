// Error-feedback rounding (GPTQ, Frantar et al. 2022; LDLQ, Chee et al. 2023) for the codebook
// method: the codes of a rotated weight matrix W' [rows, cols] chosen column by column so that the
// output error on inputs with second moment H = E[x xᵀ] [cols, cols] (x in the same rotated basis
// as W's rows) is small, instead of each weight's own error:
//   minimise  E‖(W' − Ŵ) x‖² = Σ_r (w_r − ŵ_r)ᵀ H (w_r − ŵ_r).
// With Hd = H + λ·mean(diag H)·I (dampening: a ridge that keeps Hd positive definite when the
// calibration tokens do not span every direction) and U the upper-triangular factor with
// Uᵀ U = Hd⁻¹, each row is quantized in column order i = 0 .. cols−1:
//   q_i = scale_g(i) · level[nearest code of x_i / scale_g(i)]
//   e   = (x_i − q_i) / U_ii
//   x_j ← x_j − e · U_ij   for j > i    (the rounding error pushed onto the columns not yet coded)
// Rows are independent (parallel over rows; the result does not depend on the thread count).
//
// Group scales are chosen first, per group, from the original weights exactly as Quantize does
// (fp16 or e8, ScaleMode), and kept: the feedback only changes codes. So the output is a
// QuantizedMatrix of the same method, format, group size and scale encoding as Quantize's — the
// file format and every kernel are unchanged. With H = I (any λ) U is diagonal, nothing is pushed,
// and the result equals Quantize(w, spec) bit for bit.
//
// Block-diagonal H: if H (as given, dense) is zero outside diagonal blocks — the per-block moments
// calibration.h keeps for inputs too large for a whole H —, Hd, its factor and U are block-diagonal
// too, so each block is factored on its own and the feedback stays inside it: the same codes as the
// dense computation, at Σ b³ instead of n³ for the factor and rows × Σ b² instead of rows × n² for
// Quantize. The blocks are found from H's zeros (the finest partition into contiguous diagonal
// blocks); a dense H is one block.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "quant/quantized_matrix.h"

namespace tq::quant {

struct ErrorFeedbackOptions {
  // λ: Hd = H + λ·mean(diag H)·I. If Hd is still not positive definite (rounding on a singular
  // H), λ is raised tenfold until it is (at most 4 times; then an error).
  double damp = 0.1;
  // false: every group's scale is fitted to the original weights before any feedback (the
  // default). true: fitted when the column loop reaches the group, to the weights as the
  // feedback has updated them (GPTQ's grouping); e8 scales come from the same table either way.
  bool lazy_scales = false;
};

// The feedback factor of one input distribution: U [cols, cols] (row-major, upper; Uᵀ U = Hd⁻¹).
// Made once and shared by every linear that reads the same input (q/k/v; gate/up).
class ErrorFeedback {
 public:
  // h: [n, n] symmetric positive semi-definite (a second moment). Throws tq::Error naming `name`
  // on a non-finite or negative-diagonal h, or an h that no dampening makes positive definite.
  ErrorFeedback(const double* h, int64_t n, const ErrorFeedbackOptions& opts,
                std::string_view name = "");

  int64_t dim() const { return n_; }
  double damp() const { return damp_; }  // the λ used (raised if the requested one failed)
  // The diagonal blocks found in H: their first columns (ascending, the first 0).
  const std::vector<int64_t>& block_starts() const { return starts_; }
  // U [n, n] row-major (zero below the diagonal and outside the blocks): tests.
  std::vector<double> DenseFactor() const;

  // Quantizes W' [rows, cols = dim()] (row-major, already rotated) by `spec` (codebook method,
  // any scalar format / group size / scale format / scale mode). Throws tq::Error
  // "[quantize <name>] ..." on a bad spec, a non-finite weight or a spec of another method.
  QuantizedMatrix Quantize(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec,
                           std::string_view name = "") const;

 private:
  int64_t n_ = 0;
  double damp_ = 0;
  bool lazy_scales_ = false;
  std::vector<int64_t> starts_;  // first column of each block, then n
  std::vector<int64_t> offset_;  // where block k's [b_k, b_k] factor starts in u_
  std::vector<double> u_;        // per block: its U [b, b], row-major upper triangle
};

// Σ_r (w_r − ŵ_r)ᵀ H (w_r − ŵ_r) for W, Ŵ [rows, cols] and H [cols, cols]: the output error
// E‖(W − Ŵ) x‖² summed over rows (tests, diagnostics).
double OutputError(const float* w, const float* w_hat, int64_t rows, int64_t cols, const double* h);

}  // namespace tq::quant
