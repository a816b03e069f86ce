#include "quant/error_feedback.h"

#include <cmath>
#include <string>

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
  // The reversal P: Hd = V Vᵀ with V = P L P upper, L the lower Cholesky factor of P Hd P; then
  // U = V⁻¹ = P L⁻¹ P (upper) and Uᵀ U = (V Vᵀ)⁻¹ = Hd⁻¹.
  std::vector<double> l(size_t(n * n));
  damp_ = opts.damp;
  bool ok = false;
  for (int attempt = 0; attempt < 5 && !ok; ++attempt) {
    if (attempt > 0) damp_ = damp_ > 0 ? damp_ * 10 : 1e-6;
    const double ridge = damp_ * unit;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        l[size_t(i * n + j)] =
            (mean_diag > 0 ? h[(n - 1 - i) * n + (n - 1 - j)] : (i == j ? 1.0 : 0.0)) +
            (i == j ? ridge : 0.0);
    ok = CholeskyLower(l.data(), n);
  }
  TQ_CHECK(ok, where, "the second moment is not positive definite even with dampening {}", damp_);
  // M = L⁻¹ (lower), column by column: L x = e_j by forward substitution (x_k = 0 for k < j).
  std::vector<double> m(size_t(n * n), 0.0), x(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = j; i < n; ++i) {
      const double* li = l.data() + i * n;
      double s = i == j ? 1.0 : 0.0;
      for (int64_t k = j; k < i; ++k) s -= li[k] * x[size_t(k)];
      x[size_t(i)] = s / li[i];
      m[size_t(i * n + j)] = x[size_t(i)];
    }
  }
  u_.assign(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j)
      u_[size_t(i * n + j)] = m[size_t((n - 1 - i) * n + (n - 1 - j))];
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
        const double* ui = u_.data() + i * cols;
        const double e = (x[size_t(i)] - double(scale) * double(cb.levels[code])) / ui[i];
        if (e == 0.0) continue;
        for (int64_t j = i + 1; j < cols; ++j) x[size_t(j)] -= e * ui[j];
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
