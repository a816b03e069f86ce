#include "quant/codebook.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/error.h"

namespace tq::quant {
namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kInf = std::numeric_limits<double>::infinity();

double Phi(double x) {
  return std::isinf(x) ? (x > 0 ? 1.0 : 0.0) : 0.5 * std::erfc(-x * M_SQRT1_2);
}
double Q(double x) { return std::isinf(x) ? (x > 0 ? 0.0 : 1.0) : 0.5 * std::erfc(x * M_SQRT1_2); }
double phi(double x) { return std::isinf(x) ? 0.0 : kInvSqrt2Pi * std::exp(-0.5 * x * x); }
double XPhi(double x) { return std::isinf(x) ? 0.0 : x * phi(x); }

// Panter–Dite start: level i at the (i + 1/2)/K quantile of the normalised f^(1/3).
std::vector<double> PanterDiteStart(const Density& d, int k) {
  const double lo = std::max(d.lo(), -12.0);
  const double hi = std::min(d.hi(), 12.0);
  const int n = 1 << 16;
  const double h = (hi - lo) / n;
  std::vector<double> cum(size_t(n) + 1, 0.0);
  double prev = std::cbrt(d.Pdf(lo));
  for (int i = 1; i <= n; ++i) {
    const double cur = std::cbrt(d.Pdf(lo + i * h));
    cum[size_t(i)] = cum[size_t(i) - 1] + 0.5 * h * (prev + cur);
    prev = cur;
  }
  std::vector<double> levels(static_cast<size_t>(k));
  int j = 0;
  for (int i = 0; i < k; ++i) {
    const double target = (i + 0.5) / k * cum[size_t(n)];
    while (j < n && cum[size_t(j) + 1] < target) ++j;
    const double span = cum[size_t(j) + 1] - cum[size_t(j)];
    const double frac = span > 0 ? (target - cum[size_t(j)]) / span : 0.0;
    levels[size_t(i)] = lo + (j + frac) * h;
  }
  return levels;
}

Codebook ToCodebook(const std::vector<double>& levels) {
  std::vector<float> f(levels.begin(), levels.end());
  return CodebookFromLevels(std::move(f));
}

// For levels c: the centroid g_i of each cell (t_{i-1}, t_i] (t = midpoints) and its derivatives
// with respect to the cell ends, dg/da = f(a) (g - a) / M and dg/db = f(b) (b - g) / M.
struct CellCentroids {
  std::vector<double> g, da, db;
  double residual = 0.0;  // max |c_i - g_i|

  void Compute(const Density& d, const std::vector<double>& c) {
    const size_t k = c.size();
    g.resize(k);
    da.assign(k, 0.0);
    db.assign(k, 0.0);
    residual = 0.0;
    for (size_t i = 0; i < k; ++i) {
      const double a = i == 0 ? d.lo() : 0.5 * (c[i - 1] + c[i]);
      const double b = i == k - 1 ? d.hi() : 0.5 * (c[i] + c[i + 1]);
      double m0, m1, m2;
      d.Moments(a, b, &m0, &m1, &m2);
      g[i] = m0 > 0 ? m1 / m0 : 0.5 * (a + b);
      if (m0 > 0) {
        if (i > 0) da[i] = d.Pdf(a) * (g[i] - a) / m0;
        if (i < k - 1) db[i] = d.Pdf(b) * (b - g[i]) / m0;
      }
      residual = std::max(residual, std::abs(c[i] - g[i]));
    }
  }

  // c - J⁻¹ (c - g), J tridiagonal: J[i][i-1] = -da/2, J[i][i] = 1 - (da + db)/2,
  // J[i][i+1] = -db/2 (Thomas algorithm).
  std::vector<double> NewtonStep(const std::vector<double>& c) const {
    const size_t k = c.size();
    std::vector<double> cp(k), dp(k), x(k);
    for (size_t i = 0; i < k; ++i) {
      const double lower = -0.5 * da[i], diag = 1.0 - 0.5 * (da[i] + db[i]), upper = -0.5 * db[i];
      const double rhs = -(c[i] - g[i]);
      const double den = i == 0 ? diag : diag - lower * cp[i - 1];
      cp[i] = upper / den;
      dp[i] = i == 0 ? rhs / den : (rhs - lower * dp[i - 1]) / den;
    }
    for (size_t i = k; i-- > 0;) x[i] = dp[i] - (i + 1 < k ? cp[i] * x[i + 1] : 0.0);
    for (size_t i = 0; i < k; ++i) x[i] += c[i];
    return x;
  }
};

bool IsAscending(const std::vector<double>& c) {
  for (size_t i = 0; i < c.size(); ++i) {
    if (!std::isfinite(c[i]) || (i > 0 && !(c[i] > c[i - 1]))) return false;
  }
  return true;
}

// Symmetric density: keep the levels exactly symmetric (and the middle one of an odd count at 0).
void Symmetrize(std::vector<double>* c) {
  const size_t k = c->size();
  for (size_t i = 0; i < k / 2; ++i) {
    const double v = 0.5 * ((*c)[k - 1 - i] - (*c)[i]);
    (*c)[i] = -v;
    (*c)[k - 1 - i] = v;
  }
  if (k % 2) (*c)[k / 2] = 0.0;
}

}  // namespace

uint8_t Codebook::Encode(float x) const {
  const int last = int(thresholds.size());
  const float* t = thresholds.data();
  if (last <= 7 || lut.empty()) {  // small books: a branch-free count is fastest
    if (last > 16) return uint8_t(std::lower_bound(t, t + last, x) - t);
    int code = 0;
    for (int i = 0; i < last; ++i) code += x > t[i];
    return uint8_t(code);
  }
  if (!(x == x)) return 0;  // NaN
  const float f = (x - lut_lo) * lut_inv_step;
  const int n = int(lut.size());
  int c = lut[size_t(f >= 0.0f ? (f < float(n) ? int(f) : n - 1) : 0)];
  c += (c < last) & (x > t[std::min(c, last - 1)]);  // the one threshold a cell may hold
  // Exactness guard for rounding at cell edges (practically never taken): c = #{t < x}.
  while (c < last && x > t[c]) ++c;
  while (c > 0 && !(x > t[c - 1])) --c;
  return uint8_t(c);
}

void Codebook::EncodeSpan(const float* x, int64_t n, float inv_scale, uint8_t* codes) const {
  for (int64_t i = 0; i < n; ++i) codes[i] = Encode(x[i] * inv_scale);
}

Codebook CodebookFromLevels(std::vector<float> levels) {
  TQ_CHECK(levels.size() >= 2 && levels.size() <= 256, "codebook", "{} levels (expected 2..256)",
           levels.size());
  for (size_t i = 0; i < levels.size(); ++i) {
    TQ_CHECK(std::isfinite(levels[i]), "codebook", "level {} is not finite", i);
    TQ_CHECK(i == 0 || levels[i] > levels[i - 1], "codebook",
             "levels are not strictly ascending at index {} ({} after {})", i, levels[i],
             levels[i - 1]);
  }
  Codebook cb;
  cb.thresholds.resize(levels.size() - 1);
  for (size_t i = 0; i + 1 < levels.size(); ++i)
    cb.thresholds[i] = float(0.5 * (double(levels[i]) + double(levels[i + 1])));
  cb.levels = std::move(levels);
  // Grid cells of half the smallest threshold gap hold at most one threshold each.
  const std::vector<float>& t = cb.thresholds;
  if (t.size() >= 2) {
    double gap = kInf;
    for (size_t i = 0; i + 1 < t.size(); ++i) gap = std::min(gap, double(t[i + 1]) - t[i]);
    const double span = double(t.back()) - t.front();
    const double cells = gap > 0 ? std::min(4096.0, std::ceil(2.0 * span / gap) + 1) : 4096.0;
    const double step = span / (cells - 1);
    cb.lut_lo = t.front();
    cb.lut_inv_step = float(1.0 / step);
    cb.lut.resize(size_t(cells));
    size_t below = 0;
    for (size_t i = 0; i < cb.lut.size(); ++i) {
      const double left = double(t.front()) + double(i) * step;
      while (below < t.size() && double(t[below]) < left) ++below;
      cb.lut[i] = uint8_t(below);
    }
  }
  return cb;
}

double GaussianDensity::lo() const { return -kInf; }
double GaussianDensity::hi() const { return kInf; }
double GaussianDensity::Pdf(double x) const { return phi(x); }

void GaussianDensity::Moments(double a, double b, double* m0, double* m1, double* m2) const {
  // Mass from the nearer tail keeps precision far from 0.
  *m0 = a >= 0 ? Q(a) - Q(b) : Phi(b) - Phi(a);
  *m1 = phi(a) - phi(b);
  *m2 = *m0 + XPhi(a) - XPhi(b);
}

SphereCoordinateDensity::SphereCoordinateDensity(int dim) : dim_(dim) {
  TQ_CHECK(dim >= 4 && dim <= 65536, "sphere density", "dimension {} outside [4, 65536]", dim);
  half_width_ = std::sqrt(double(dim));
  const int n = 1 << 18;
  h_ = 2 * half_width_ / n;
  for (auto& c : cum_) c.assign(size_t(n) + 1, 0.0);
  norm_ = 1.0;
  double prev[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) prev[k] = std::pow(lo(), k) * Pdf(lo());
  for (int i = 1; i <= n; ++i) {
    const double x = lo() + i * h_;
    const double f = Pdf(x);
    const double cur[3] = {f, x * f, x * x * f};
    for (int k = 0; k < 3; ++k) {
      cum_[k][size_t(i)] = cum_[k][size_t(i) - 1] + 0.5 * h_ * (prev[k] + cur[k]);
      prev[k] = cur[k];
    }
  }
  norm_ = 1.0 / cum_[0][size_t(n)];
}

double SphereCoordinateDensity::Pdf(double x) const {
  if (x <= -half_width_ || x >= half_width_) return 0.0;
  // Unnormalised in the constructor (norm_ = 1 there), normalised afterwards.
  return norm_ * std::pow(1.0 - x * x / dim_, 0.5 * (dim_ - 3));
}

void SphereCoordinateDensity::Cumulative(double x, double out[3]) const {
  x = std::clamp(x, lo(), hi());
  const int64_t n = int64_t(cum_[0].size()) - 1;
  int64_t j = std::clamp<int64_t>(int64_t(std::floor((x - lo()) / h_)), 0, n - 1);
  const double xj = lo() + j * h_;
  const double fj = Pdf(xj), fx = Pdf(x);
  const double dx = x - xj;
  const double pj[3] = {fj, xj * fj, xj * xj * fj};
  const double px[3] = {fx, x * fx, x * x * fx};
  for (int k = 0; k < 3; ++k) out[k] = norm_ * cum_[k][size_t(j)] + 0.5 * dx * (pj[k] + px[k]);
}

void SphereCoordinateDensity::Moments(double a, double b, double* m0, double* m1,
                                      double* m2) const {
  double ca[3], cb[3];
  Cumulative(a, ca);
  Cumulative(b, cb);
  *m0 = cb[0] - ca[0];
  *m1 = cb[1] - ca[1];
  *m2 = cb[2] - ca[2];
}

Codebook LloydMax(const Density& density, int k, const LloydOptions& options) {
  TQ_CHECK(k >= 2 && k <= 256, "lloyd-max", "{} levels (expected 2..256)", k);
  std::vector<double> c = PanterDiteStart(density, k);
  CellCentroids cur, trial;
  cur.Compute(density, c);
  int stalled = 0;
  for (int it = 0; it < options.max_iterations && cur.residual >= options.tolerance; ++it) {
    // Newton on F(c) = c - centroids(c) (tridiagonal Jacobian), kept only when it lowers the
    // residual; otherwise a plain Lloyd step c = centroids(c). Lloyd alone is slow for many levels.
    std::vector<double> next = cur.NewtonStep(c);
    bool accepted = false;
    if (IsAscending(next)) {
      Symmetrize(&next);
      trial.Compute(density, next);
      accepted = trial.residual < cur.residual;
    }
    if (!accepted) {
      next = cur.g;
      Symmetrize(&next);
      trial.Compute(density, next);
    }
    // Numerically integrated densities have a residual floor: stop once it stops falling.
    stalled = trial.residual < cur.residual ? 0 : stalled + 1;
    if (stalled >= 100) break;
    c = std::move(next);
    std::swap(cur, trial);
  }
  Codebook cb = ToCodebook(c);
  cb.mse = CodebookMse(cb, density);
  return cb;
}

double CodebookMse(const Codebook& cb, const Density& density) {
  // Cells from the float thresholds actually used by Encode, levels as stored.
  double mse = 0.0;
  const int k = cb.size();
  for (int i = 0; i < k; ++i) {
    const double a =
        i == 0 ? density.lo() : std::max(density.lo(), double(cb.thresholds[size_t(i) - 1]));
    const double b =
        i == k - 1 ? density.hi() : std::min(density.hi(), double(cb.thresholds[size_t(i)]));
    if (!(b > a)) continue;
    double m0, m1, m2;
    density.Moments(a, b, &m0, &m1, &m2);
    const double c = cb.levels[size_t(i)];
    mse += m2 - 2 * c * m1 + c * c * m0;
  }
  return mse;
}

const Codebook& GaussianCodebook(int bits) {
  TQ_CHECK(bits == 1 || bits == 2 || bits == 3 || bits == 4 || bits == 8, "gaussian codebook",
           "unsupported bit width {} (1, 2, 3, 4 or 8)", bits);
  // Each width on first use.
  static auto make = [](int levels, double tolerance) {
    LloydOptions options;
    options.tolerance = tolerance;
    return LloydMax(GaussianDensity(), levels, options);
  };
  switch (bits) {
    case 1: {
      static const Codebook book = make(2, 1e-12);
      return book;
    }
    case 2: {
      static const Codebook book = make(4, 1e-12);
      return book;
    }
    case 3: {
      static const Codebook book = make(8, 1e-12);
      return book;
    }
    case 4: {
      static const Codebook book = make(16, 1e-12);
      return book;
    }
    default: {
      static const Codebook book = make(256, 1e-12);
      return book;
    }
  }
}

const Codebook& TernaryCodebook() {
  static const Codebook book = LloydMax(GaussianDensity(), 3);
  return book;
}

const Codebook& LinearQ8Codebook() {
  static const Codebook book = [] {
    std::vector<float> levels(256);
    for (int c = 0; c < 256; ++c) levels[size_t(c)] = float(c - 128) * (7.0f / 256.0f);
    return CodebookFromLevels(std::move(levels));
  }();
  return book;
}

bool IsLinearQ8Levels(const float* levels) {
  const float step = levels[129];
  if (!(step > 0.0f)) return false;
  for (int c = 0; c < 256; ++c)
    if (std::fabs(levels[c] - float(c - 128) * step) > 1e-6f * step) return false;
  return true;
}

const Codebook& GaussianCodebook(CodeFormat format) {
  if (format == CodeFormat::kTernary) return TernaryCodebook();
  return GaussianCodebook(Traits(format).code_bits);
}

const Codebook& SphereCodebook(int dim, int bits) {
  TQ_CHECK(bits == 1 || bits == 2 || bits == 3 || bits == 4 || bits == 8, "sphere codebook",
           "unsupported bit width {} (1, 2, 3, 4 or 8)", bits);
  TQ_CHECK(dim >= 4 && dim <= 65536, "sphere codebook", "dimension {} outside [4, 65536]", dim);
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::unique_ptr<Codebook>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{dim, bits}];
  if (!slot) {
    LloydOptions options;
    options.tolerance = 1e-10;  // the numeric integration is good to ~1e-9
    slot = std::make_unique<Codebook>(LloydMax(SphereCoordinateDensity(dim), 1 << bits, options));
  }
  return *slot;
}

}  // namespace tq::quant
