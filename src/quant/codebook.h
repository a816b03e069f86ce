// Scalar codebooks: Lloyd-Max quantizers for N(0, 1) (the rotated, normalised weights and KV
// coordinates), the ternary {-c, 0, +c} tier, and for the exact coordinate distribution of a
// rotated d-dimensional unit vector scaled by √d (density ∝ (1 - y²/d)^((d-3)/2) on [-√d, √d]).
//
// Lloyd's iteration alternates thresholds = midpoints of neighbouring levels and levels =
// centroids of their cells; for N(0,1) the cell integrals are exact (centroid of [a, b] =
// (φ(a) - φ(b)) / (Φ(b) - Φ(a))). Codebooks are computed once per process and cached; the
// converter stores the levels it used in the checkpoint, so a file never depends on this code.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/format.h"

namespace tq::quant {

struct Codebook {
  std::vector<float> levels;      // ascending; code i decodes to levels[i]
  std::vector<float> thresholds;  // [size()-1], midpoints: code i covers (t[i-1], t[i]]
  double mse = 0.0;               // E[(X - Q(X))²] under the density it was designed for

  int size() const { return int(levels.size()); }
  // Index of the nearest level (a value exactly on a threshold goes to the lower index; NaN to 0).
  uint8_t Encode(float x) const;
  float Decode(uint8_t code) const { return levels[code]; }
  // codes[i] = Encode(x[i] * inv_scale) for i in [0, n).
  void EncodeSpan(const float* x, int64_t n, float inv_scale, uint8_t* codes) const;

  // Encode's accelerator, built by CodebookFromLevels: a uniform grid over the thresholds with
  // lut[i] = #{t < lut_lo + i / lut_inv_step}; Encode starts there and walks to the exact answer,
  // so it is correct even when the table is empty or stale.
  std::vector<uint8_t> lut;
  float lut_lo = 0.0f;
  float lut_inv_step = 0.0f;
};

// A 1-D density on [lo, hi] (±infinity allowed) with its partial moments over an interval.
class Density {
 public:
  virtual ~Density() = default;
  virtual double lo() const = 0;
  virtual double hi() const = 0;
  virtual double Pdf(double x) const = 0;
  // ∫_a^b x^k f(x) dx for k = 0, 1, 2 (lo <= a <= b <= hi).
  virtual void Moments(double a, double b, double* m0, double* m1, double* m2) const = 0;
};

class GaussianDensity final : public Density {
 public:
  double lo() const override;
  double hi() const override;
  double Pdf(double x) const override;
  void Moments(double a, double b, double* m0, double* m1, double* m2) const override;
};

// One coordinate of a uniformly random unit vector in ℝ^dim, times √dim (variance 1; tends to
// N(0,1) as dim grows). Integrated numerically on a fine grid (dim >= 4).
class SphereCoordinateDensity final : public Density {
 public:
  explicit SphereCoordinateDensity(int dim);
  double lo() const override { return -half_width_; }
  double hi() const override { return half_width_; }
  double Pdf(double x) const override;
  void Moments(double a, double b, double* m0, double* m1, double* m2) const override;
  int dim() const { return dim_; }

 private:
  void Cumulative(double x, double out[3]) const;  // ∫_lo^x y^k f(y) dy
  int dim_;
  double half_width_;
  double h_;                    // grid step
  double norm_;                 // 1 / total mass of the unnormalised density
  std::vector<double> cum_[3];  // cumulative moments at grid points
};

struct LloydOptions {
  int max_iterations = 100000;
  double tolerance = 1e-12;  // stop when no level moves by more than this
};

// Lloyd-Max quantizer with `levels` >= 2 levels for a symmetric density (levels are kept
// symmetric about 0). Started from the Panter–Dite point density f^(1/3).
Codebook LloydMax(const Density& density, int levels, const LloydOptions& options = {});

// E[(X - Q(X))²] of any codebook under a density.
double CodebookMse(const Codebook& codebook, const Density& density);

// Cached codebooks (computed on first use, thread-safe).
const Codebook& GaussianCodebook(int bits);  // bits in {1, 2, 3, 4, 8}
const Codebook& TernaryCodebook();           // Lloyd-Max with 3 levels for N(0,1)
// The N(0,1) codebook with a format's level count (ternary -> TernaryCodebook()).
const Codebook& GaussianCodebook(CodeFormat format);
// The q8 tier's codebook: 256 levels (c - 128) · 7/256, the int8 grid in units of the group's RMS
// scale (±3.5 at scale = RMS; convert's scale search covers 0.7-1.3x). The int8 kernels read such
// codes as int8 without a table lookup (the AVX2 decode: 5 ops per 32 codes instead of 27). MSE
// of Gaussian groups of 128 at their best scale (session 13, numpy): 4.1e-5 vs Lloyd-Max's
// 3.1e-5, but the int8 kernels compute with Lloyd-Max's levels rounded to an int8 grid (173
// distinct values), ~1.4e-4; with this grid they use the stored levels exactly.
const Codebook& LinearQ8Codebook();
// True when 256 levels are the int8 grid times one step: levels[c] = (c - 128) · step, within 1e-6
// of a step (LinearQ8Codebook's form, at any step): the int8 kernels then read codes as int8.
bool IsLinearQ8Levels(const float* levels);
// Lloyd-Max for SphereCoordinateDensity(dim) at 1, 2, 3, 4 or 8 bits (dim in [4, 65536]).
const Codebook& SphereCodebook(int dim, int bits);

// Builds a Codebook (thresholds = midpoints) from given ascending levels; mse left 0.
Codebook CodebookFromLevels(std::vector<float> levels);

}  // namespace tq::quant
