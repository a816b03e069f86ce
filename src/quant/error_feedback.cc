#include "quant/error_feedback.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/codebook.h"
#include "quant/e8_scales.h"
#include "quant/group_quantizer.h"
#include "quant/packing.h"

namespace tq::quant {
namespace {

std::string Where(std::string_view prefix, std::string_view name) {
  return name.empty() ? std::string(prefix) : std::string(prefix) + " " + std::string(name);
}

// In place: a [n, n] (row-major, symmetric positive definite) -> its lower Cholesky factor L
// (a = L Lᵀ; the upper triangle is zeroed). False if a pivot is not positive.
bool CholeskyLower(double* a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double* rj = a + j * n;
    double d = rj[j];
    for (int64_t k = 0; k < j; ++k) d -= rj[k] * rj[k];
    if (!(d > 0.0) || !std::isfinite(d)) return false;
    const double ljj = std::sqrt(d);
    rj[j] = ljj;
    for (int64_t i = j + 1; i < n; ++i) {
      double* ri = a + i * n;
      double s = ri[j];
      for (int64_t k = 0; k < j; ++k) s -= ri[k] * rj[k];
      ri[j] = s / ljj;
    }
    for (int64_t k = j + 1; k < n; ++k) rj[k] = 0.0;
  }
  return true;
}

// The finest partition of [0, n) into contiguous blocks with h zero between blocks: a block
// ends at e once no row i <= e has a non-zero beyond e. Returns the first column of each block,
// then n.
std::vector<int64_t> DiagonalBlocks(const double* h, int64_t n) {
  std::vector<int64_t> starts = {0};
  int64_t reach = 0;  // the last column with a non-zero in the rows of the current block
  for (int64_t i = 0; i < n; ++i) {
    const double* hi = h + i * n;
    int64_t last = i;
    for (int64_t j = n - 1; j > reach && j > i; --j) {
      if (hi[j] != 0.0) {
        last = j;
        break;
      }
    }
    reach = std::max(reach, last);
    if (reach == i && i + 1 < n) {
      starts.push_back(i + 1);
      reach = i + 1;
    }
  }
  starts.push_back(n);
  return starts;
}

// U [b, b] (upper; Uᵀ U = Hd_b⁻¹) of one diagonal block hb [b, b] (row stride n) with the ridge
// added to its diagonal; mean_diag == 0 stands for an all-zero H (the identity instead). The
// reversal P: Hd = V Vᵀ with V = P L P upper, L the lower Cholesky factor of P Hd P; then
// U = V⁻¹ = P L⁻¹ P (upper) and Uᵀ U = (V Vᵀ)⁻¹ = Hd⁻¹. False if Hd is not positive definite.
bool BlockFactor(const double* hb, int64_t n, int64_t b, double mean_diag, double ridge,
                 double* u) {
  std::vector<double> l(size_t(b * b));
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < b; ++j)
      l[size_t(i * b + j)] =
          (mean_diag > 0 ? hb[(b - 1 - i) * n + (b - 1 - j)] : (i == j ? 1.0 : 0.0)) +
          (i == j ? ridge : 0.0);
  if (!CholeskyLower(l.data(), b)) return false;
  // M = L⁻¹ (lower), column by column: L x = e_j by forward substitution (x_k = 0 for k < j).
  std::vector<double> m(size_t(b * b), 0.0), x(static_cast<size_t>(b));
  for (int64_t j = 0; j < b; ++j) {
    for (int64_t i = j; i < b; ++i) {
      const double* li = l.data() + i * b;
      double s = i == j ? 1.0 : 0.0;
      for (int64_t k = j; k < i; ++k) s -= li[k] * x[size_t(k)];
      x[size_t(i)] = s / li[i];
      m[size_t(i * b + j)] = x[size_t(i)];
    }
  }
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < b; ++j)
      u[i * b + j] = j < i ? 0.0 : m[size_t((b - 1 - i) * b + (b - 1 - j))];
  return true;
}

}  // namespace

ErrorFeedback::ErrorFeedback(const double* h, int64_t n, const ErrorFeedbackOptions& opts,
                             std::string_view name)
    : n_(n), lazy_scales_(opts.lazy_scales) {
  const std::string where = Where("error feedback", name);
  TQ_CHECK(n > 0 && h != nullptr, where, "no second moment (dimension {})", n);
  TQ_CHECK(opts.damp >= 0 && std::isfinite(opts.damp), where, "dampening {} must be >= 0",
           opts.damp);
  double mean_diag = 0;
  for (int64_t i = 0; i < n * n; ++i)
    TQ_CHECK(std::isfinite(h[i]), where, "non-finite second moment at [{}, {}]", i / n, i % n);
  for (int64_t i = 0; i < n; ++i) {
    TQ_CHECK(h[i * n + i] >= 0, where, "negative diagonal {} at {}", h[i * n + i], i);
    mean_diag += h[i * n + i];
  }
  mean_diag /= double(n);
  // An all-zero H (a linear that saw no input): every direction alike, i.e. plain rounding.
  const double unit = mean_diag > 0 ? mean_diag : 1.0;
  starts_ = mean_diag > 0 ? DiagonalBlocks(h, n) : std::vector<int64_t>{0, n};
  int64_t total = 0;
  for (size_t k = 0; k + 1 < starts_.size(); ++k) {
    offset_.push_back(total);
    total += (starts_[k + 1] - starts_[k]) * (starts_[k + 1] - starts_[k]);
  }
  u_.assign(size_t(total), 0.0);
  // One λ for all blocks (the smallest of λ, 10λ, ... that makes every block positive definite),
  // so that the result is the dense computation's.
  damp_ = opts.damp;
  bool ok = false;
  for (int attempt = 0; attempt < 5 && !ok; ++attempt) {
    if (attempt > 0) damp_ = damp_ > 0 ? damp_ * 10 : 1e-6;
    ok = true;
    for (size_t k = 0; ok && k + 1 < starts_.size(); ++k) {
      const int64_t s = starts_[k], b = starts_[k + 1] - s;
      ok = BlockFactor(h + s * n + s, n, b, mean_diag, damp_ * unit, u_.data() + offset_[k]);
    }
  }
  TQ_CHECK(ok, where, "the second moment is not positive definite even with dampening {}", damp_);
}

std::vector<double> ErrorFeedback::DenseFactor() const {
  std::vector<double> u(size_t(n_ * n_), 0.0);
  for (size_t k = 0; k + 1 < starts_.size(); ++k) {
    const int64_t s = starts_[k], b = starts_[k + 1] - s;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j)
        u[size_t((s + i) * n_ + s + j)] = u_[size_t(offset_[k] + i * b + j)];
  }
  return u;
}

QuantizedMatrix ErrorFeedback::Quantize(const float* w, int64_t rows, int64_t cols,
                                        const QuantSpec& spec, std::string_view name) const {
  const std::string where = Where("quantize", name);
  TQ_CHECK(spec.method == QuantMethod::kCodebook, where,
           "error-feedback rounding needs the codebook method");
  TQ_CHECK(cols == n_, where, "{} columns, but the second moment is {} x {}", cols, n_, n_);
  // The scales (and the spec's checks): exactly what plain rounding stores. Its codes are
  // replaced below.
  QuantizedMatrix q = quant::Quantize(w, rows, cols, spec, name);
  const Codebook& cb = spec.codebook ? *spec.codebook : GaussianCodebook(spec.format);
  const int64_t g = spec.group_size;
  const uint8_t zero_code = cb.Encode(0.0f);
  const bool e8 = spec.scale_format == ScaleFormat::kE8;
  E8ScaleTable table;
  if (lazy_scales_ && e8)
    table = spec.e8_table ? *spec.e8_table : E8ScaleTableFor(w, rows, cols, g);
  const int64_t groups = cols / g;
  ThreadPool::Global().ParallelFor(rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<double> x(static_cast<size_t>(cols));
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
    std::vector<float> group(static_cast<size_t>(g));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < cols; ++c) x[size_t(c)] = w[r * cols + c];
      size_t blk = 0;  // the block of column i
      for (int64_t i = 0; i < cols; ++i) {
        if (lazy_scales_ && i % g == 0) {  // refit this group's scale to the updated weights
          for (int64_t j = 0; j < g; ++j) group[size_t(j)] = float(x[size_t(i + j)]);
          const size_t k = size_t(r * groups + i / g);
          if (e8) {
            q.scale_codes[k] =
                QuantizeGroupE8(group.data(), g, cb, spec.scale, table, codes.data() + i);
          } else {
            q.scales[k] = QuantizeGroup(group.data(), g, cb, spec.scale, codes.data() + i);
          }
        }
        const float scale = q.Scale(r, i / g);
        // The same arithmetic as plain rounding (x_i * (1 / scale) in float), so that with no
        // feedback the codes are identical.
        const uint8_t code =
            scale == 0.0f ? zero_code : cb.Encode(float(x[size_t(i)]) * (1.0f / scale));
        codes[size_t(i)] = code;
        if (i == starts_[size_t(blk + 1)]) ++blk;
        const int64_t s = starts_[size_t(blk)], b = starts_[size_t(blk + 1)] - s;
        // Row i − s of the block's U (its column k is column s + k of the matrix).
        const double* ui = u_.data() + offset_[size_t(blk)] + (i - s) * b;
        const double e = (x[size_t(i)] - double(scale) * double(cb.levels[code])) / ui[i - s];
        if (e == 0.0) continue;
        double* xs = x.data() + s;
        for (int64_t k = i - s + 1; k < b; ++k) xs[k] -= e * ui[k];
      }
      PackCodes(spec.format, codes.data(), cols, q.codes.data() + size_t(r) * q.row_bytes());
    }
  });
  return q;
}

double OutputError(const float* w, const float* w_hat, int64_t rows, int64_t cols,
                   const double* h) {
  std::vector<double> d(static_cast<size_t>(cols));
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) d[size_t(c)] = double(w[r * cols + c]) - w_hat[r * cols + c];
    for (int64_t i = 0; i < cols; ++i) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += h[i * cols + j] * d[size_t(j)];
      total += d[size_t(i)] * s;
    }
  }
  return total;
}

}  // namespace tq::quant
