#include "quant/group_quantizer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "quant/packing.h"

namespace tq::quant {
namespace {

// Codes of one trial assignment: on the stack for the usual group sizes (no allocation per group).
class TrialCodes {
 public:
  explicit TrialCodes(int64_t n) {
    if (n > int64_t(sizeof(stack_))) heap_.resize(size_t(n));
  }
  uint8_t* data() { return heap_.empty() ? stack_ : heap_.data(); }

 private:
  uint8_t stack_[512];
  std::vector<uint8_t> heap_;
};

// fp16 value of a non-negative scale; throws if it does not fit.
uint16_t ScaleToF16(double s, const char* where) {
  const uint16_t h = F32ToF16(float(s));
  TQ_CHECK(std::isfinite(F16ToF32(h)), where, "group scale {} overflows fp16", s);
  return h;
}

double AssignAndError(const float* w, int64_t n, const Codebook& cb, float scale, uint8_t* codes) {
  double err = 0.0;
  if (scale == 0.0f) {
    const uint8_t zero = cb.Encode(0.0f);
    for (int64_t i = 0; i < n; ++i) {
      codes[i] = zero;
      err += double(w[i]) * w[i];
    }
    return err;
  }
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) {
    codes[i] = cb.Encode(w[i] * inv);
    const double d = double(w[i]) - double(scale) * cb.levels[codes[i]];
    err += d * d;
  }
  return err;
}

std::string Where(std::string_view name) {
  return name.empty() ? std::string("quantize") : "quantize " + std::string(name);
}

const Codebook& SpecCodebook(const QuantSpec& spec, const std::string& where) {
  const Codebook& cb = spec.codebook ? *spec.codebook : GaussianCodebook(spec.format);
  TQ_CHECK(cb.size() == Traits(spec.format).levels, where,
           "codebook has {} levels, format {} needs {}", cb.size(), Traits(spec.format).name,
           Traits(spec.format).levels);
  return cb;
}

void CheckSpec(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec,
               const std::string& where) {
  TQ_CHECK(rows > 0 && cols > 0, where, "bad shape [{}, {}]", rows, cols);
  TQ_CHECK(spec.group_size > 0 && cols % spec.group_size == 0, where,
           "group size {} does not divide {} columns", spec.group_size, cols);
  const ScaleOptions& so = spec.scale;
  TQ_CHECK(so.refine_rounds >= 0 && so.refine_rounds <= 100, where, "refine rounds {}",
           so.refine_rounds);
  TQ_CHECK(so.search_steps >= 1 && so.search_steps <= 1000 && so.search_lo > 0 &&
               so.search_hi >= so.search_lo && so.search_hi <= 100,
           where, "scale search: {} steps over [{}, {}]", so.search_steps, so.search_lo,
           so.search_hi);
  TQ_CHECK(so.search_prune >= 1.0f, where, "scale search prune factor {} < 1", so.search_prune);
  if (spec.method == QuantMethod::kAffine) {
    TQ_CHECK(spec.format != CodeFormat::kTernary, where,
             "affine quantization needs a binary format, not ternary");
  }
  if (spec.scale_format == ScaleFormat::kE8) {
    TQ_CHECK(spec.method == QuantMethod::kCodebook, where,
             "e8 group scales need the codebook method (affine and vector keep fp16)");
  }
  if (spec.method == QuantMethod::kVector) {
    const VectorCodebook* v = spec.vector_codebook;
    TQ_CHECK(v != nullptr, where, "the vector method needs a vector codebook");
    TQ_CHECK(v->bits_per_dim == Traits(spec.format).code_bits && v->dim >= 1 && v->dim <= 8 &&
                 v->size() == 1 << (v->bits_per_dim * v->dim),
             where, "vector codebook ({}-D, {} bits per coordinate) does not fit format {}", v->dim,
             v->bits_per_dim, Traits(spec.format).name);
    TQ_CHECK(spec.group_size % v->dim == 0, where, "group size {} is not a multiple of {}",
             spec.group_size, v->dim);
  }
  const int64_t n = rows * cols;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i]))
      Fail(where, "non-finite weight {} at [{}, {}]", w[i], i / cols, i % cols);
  }
}

// Scale fitting shared by the scalar and vector methods. assign(scale, codes) -> squared error;
// moments(codes, &wc, &cc) accumulates <w, c> and <c, c>. Every run starts at a fp16 scale,
// assigns codes, then (unless kRms) alternates scale = <w,c>/<c,c> and re-assignment; the
// lowest-error iterate over all runs is kept. kMseSearch adds runs from RMS·f for the grid f.
template <typename Assign, typename Moments>
uint16_t FitScale(const float* w, int64_t n, const ScaleOptions& opt, uint8_t* codes,
                  double* sq_error, Assign&& assign, Moments&& moments) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(w[i]) * w[i];
  const double rms = n > 0 ? std::sqrt(ss / double(n)) : 0.0;
  uint16_t best = ScaleToF16(rms, "quantize group");
  double best_err = assign(F16ToF32(best), codes);
  if (opt.mode == ScaleMode::kRms || best_err == 0.0) {
    if (sq_error) *sq_error = best_err;
    return best;
  }
  TrialCodes scratch(n);
  uint8_t* trial = scratch.data();
  auto consider = [&](uint16_t s, double e) {
    if (e < best_err) {
      best_err = e;
      best = s;
      std::copy(trial, trial + n, codes);
    }
  };
  auto refine = [&](uint16_t s) {  // trial holds the codes assigned at scale s
    for (int r = 0; r < opt.refine_rounds; ++r) {
      double wc = 0.0, cc = 0.0;
      moments(trial, &wc, &cc);
      if (!(cc > 0.0) || !(wc > 0.0)) return;
      const uint16_t next = ScaleToF16(wc / cc, "quantize group");
      if (next == s) return;  // fixed point
      s = next;
      consider(s, assign(F16ToF32(s), trial));
    }
  };
  std::copy(codes, codes + n, trial);
  refine(best);  // from RMS
  if (opt.mode == ScaleMode::kMseSearch) {
    for (int k = 0; k < opt.search_steps; ++k) {
      const double f = opt.search_steps == 1 ? opt.search_lo
                                             : opt.search_lo + (opt.search_hi - opt.search_lo) * k /
                                                                   (opt.search_steps - 1);
      const uint16_t s = ScaleToF16(rms * f, "quantize group");
      if (s == F32ToF16(float(rms))) continue;  // the RMS run is done
      const double e = assign(F16ToF32(s), trial);
      consider(s, e);
      if (e <= double(opt.search_prune) * best_err) refine(s);
    }
  }
  if (sq_error) *sq_error = best_err;
  return best;
}

// Quantizes row `r` into codes (unpacked), scales (or, with e8 != null, scale codes) and mins;
// returns its squared error.
double QuantizeRow(const float* row, int64_t cols, const QuantSpec& spec, const Codebook* cb,
                   const E8ScaleTable* e8, uint8_t* codes, uint16_t* scales, uint8_t* scale_codes,
                   uint16_t* mins) {
  const int64_t g = spec.group_size;
  const int bits = Traits(spec.format).code_bits;
  double err = 0.0;
  for (int64_t c0 = 0, k = 0; c0 < cols; c0 += g, ++k) {
    double e = 0.0;
    if (e8) {
      scale_codes[k] = QuantizeGroupE8(row + c0, g, *cb, spec.scale, *e8, codes + c0, &e);
    } else if (spec.method == QuantMethod::kAffine) {
      QuantizeAffineGroup(row + c0, g, bits, &scales[k], &mins[k], codes + c0, &e);
    } else if (spec.method == QuantMethod::kVector) {
      scales[k] =
          QuantizeVectorGroup(row + c0, g, *spec.vector_codebook, spec.scale, codes + c0, &e);
    } else {
      scales[k] = QuantizeGroup(row + c0, g, *cb, spec.scale, codes + c0, &e);
    }
    err += e;
  }
  return err;
}

// The e8 table of a spec for W (its own, or the spec's), or nullopt for fp16 scales.
std::optional<E8ScaleTable> SpecE8Table(const float* w, int64_t rows, int64_t cols,
                                        const QuantSpec& spec) {
  if (spec.scale_format != ScaleFormat::kE8) return std::nullopt;
  if (spec.e8_table) return *spec.e8_table;
  return E8ScaleTableFor(w, rows, cols, spec.group_size);
}

}  // namespace

uint8_t QuantizeGroupE8(const float* w, int64_t n, const Codebook& cb, const ScaleOptions& options,
                        const E8ScaleTable& table, uint8_t* codes, double* sq_error) {
  double err = 0.0;
  const float fit = F16ToF32(QuantizeGroup(w, n, cb, options, codes, &err));
  if (fit == 0.0f) {  // an all-zero group (or one below fp16): code 0, codes as QuantizeGroup's
    if (sq_error) *sq_error = err;
    return 0;
  }
  const int c0 = NearestE8Code(table, fit);
  TrialCodes scratch(n);
  uint8_t* trial = scratch.data();
  int best = -1;
  double best_err = 0.0;
  auto consider = [&](int c) {
    const double e = AssignAndError(w, n, cb, table.values[size_t(c)], trial);
    if (best < 0 || e < best_err) {
      best = c;
      best_err = e;
      std::copy(trial, trial + n, codes);
    }
  };
  if (options.mode == ScaleMode::kRms) {
    consider(c0);
  } else {
    consider(0);
    for (int c = std::max(1, c0 - 2); c <= std::min(kE8TableSize - 1, c0 + 2); ++c) consider(c);
  }
  if (sq_error) *sq_error = best_err;
  return uint8_t(best);
}

uint16_t QuantizeGroup(const float* w, int64_t n, const Codebook& cb, const ScaleOptions& options,
                       uint8_t* codes, double* sq_error) {
  auto assign = [&](float scale, uint8_t* c) { return AssignAndError(w, n, cb, scale, c); };
  auto moments = [&](const uint8_t* c, double* wc, double* cc) {
    for (int64_t i = 0; i < n; ++i) {
      const double l = cb.levels[c[i]];
      *wc += double(w[i]) * l;
      *cc += l * l;
    }
  };
  return FitScale(w, n, options, codes, sq_error, assign, moments);
}

uint16_t QuantizeVectorGroup(const float* w, int64_t n, const VectorCodebook& vcb,
                             const ScaleOptions& options, uint8_t* codes, double* sq_error) {
  const int d = vcb.dim, bits = vcb.bits_per_dim;
  TQ_CHECK(d >= 1 && n % d == 0, "quantize vector group", "{} weights in {}-D vectors", n, d);
  const unsigned mask = (1u << bits) - 1;
  auto assign = [&](float scale, uint8_t* c) {
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    float x[8];
    double err = 0.0;
    for (int64_t i = 0; i < n; i += d) {
      for (int j = 0; j < d; ++j) x[j] = w[i + j] * inv;
      const int p = vcb.Encode(x);
      const float* pt = vcb.Decode(p);
      for (int j = 0; j < d; ++j) {
        c[i + j] = uint8_t((unsigned(p) >> (bits * j)) & mask);
        const double e = double(w[i + j]) - double(scale) * pt[j];
        err += e * e;
      }
    }
    return err;
  };
  auto moments = [&](const uint8_t* c, double* wc, double* cc) {
    for (int64_t i = 0; i < n; i += d) {
      int p = 0;
      for (int j = 0; j < d; ++j) p |= int(c[i + j]) << (bits * j);
      const float* pt = vcb.Decode(p);
      for (int j = 0; j < d; ++j) {
        *wc += double(w[i + j]) * pt[j];
        *cc += double(pt[j]) * pt[j];
      }
    }
  };
  return FitScale(w, n, options, codes, sq_error, assign, moments);
}

QuantizedMatrix Quantize(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec,
                         std::string_view name) {
  const std::string where = Where(name);
  CheckSpec(w, rows, cols, spec, where);
  const Codebook* cb = spec.method == QuantMethod::kCodebook ? &SpecCodebook(spec, where) : nullptr;
  QuantizedMatrix q;
  q.method = spec.method;
  q.format = spec.format;
  q.rows = rows;
  q.cols = cols;
  q.group_size = spec.group_size;
  const int64_t groups = cols / spec.group_size;
  const std::optional<E8ScaleTable> e8 = SpecE8Table(w, rows, cols, spec);
  q.codes.resize(size_t(rows) * q.row_bytes());
  if (e8) {
    q.scale_codes.resize(size_t(rows * groups));
    q.scale_table.assign(e8->values.begin(), e8->values.end());
  } else {
    q.scales.resize(size_t(rows * groups));
  }
  if (spec.method == QuantMethod::kAffine) {
    q.mins.resize(size_t(rows * groups));
  } else if (spec.method == QuantMethod::kVector) {
    q.codebook = spec.vector_codebook->points;
    q.vector_dim = spec.vector_codebook->dim;
  } else {
    q.codebook = cb->levels;
  }
  ThreadPool::Global().ParallelFor(rows, 4, [&](int64_t r0, int64_t r1) {
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      QuantizeRow(w + r * cols, cols, spec, cb, e8 ? &*e8 : nullptr, codes.data(),
                  e8 ? nullptr : q.scales.data() + r * groups,
                  e8 ? q.scale_codes.data() + r * groups : nullptr,
                  q.mins.empty() ? nullptr : q.mins.data() + r * groups);
      PackCodes(spec.format, codes.data(), cols, q.codes.data() + size_t(r) * q.row_bytes());
    }
  });
  return q;
}

QuantError QuantizationError(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec,
                             std::string_view name) {
  const std::string where = Where(name);
  CheckSpec(w, rows, cols, spec, where);
  const Codebook* cb = spec.method == QuantMethod::kCodebook ? &SpecCodebook(spec, where) : nullptr;
  const int64_t groups = cols / spec.group_size;
  const std::optional<E8ScaleTable> e8 = SpecE8Table(w, rows, cols, spec);
  std::vector<double> row_err(static_cast<size_t>(rows)), row_norm(static_cast<size_t>(rows));
  ThreadPool::Global().ParallelFor(rows, 4, [&](int64_t r0, int64_t r1) {
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
    std::vector<uint16_t> scales(static_cast<size_t>(groups)), mins(static_cast<size_t>(groups));
    std::vector<uint8_t> scale_codes(static_cast<size_t>(groups));
    for (int64_t r = r0; r < r1; ++r) {
      row_err[size_t(r)] =
          QuantizeRow(w + r * cols, cols, spec, cb, e8 ? &*e8 : nullptr, codes.data(),
                      scales.data(), scale_codes.data(), mins.data());
      double ss = 0.0;
      for (int64_t c = 0; c < cols; ++c) ss += double(w[r * cols + c]) * w[r * cols + c];
      row_norm[size_t(r)] = ss;
    }
  });
  QuantError e;
  for (int64_t r = 0; r < rows; ++r) {
    e.sq_error += row_err[size_t(r)];
    e.sq_norm += row_norm[size_t(r)];
  }
  return e;
}

}  // namespace tq::quant
