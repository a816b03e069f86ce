#include "quant/e8_scales.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tq::quant {

std::string_view ScaleFormatName(ScaleFormat f) { return f == ScaleFormat::kE8 ? "e8" : "f16"; }

E8ScaleTable MakeE8ScaleTable(double rms_lo, double rms_hi) {
  E8ScaleTable t;
  double top = 1.0;
  int steps = kE8MaxSteps;
  if (rms_hi > 0 && std::isfinite(rms_hi)) {
    top = kE8TopMargin * rms_hi;
    const double lo = kE8BottomMargin * std::clamp(rms_lo, rms_hi * 1e-30, rms_hi);
    const double octaves = std::log2(top / lo);  // > 0: top / lo >= 3
    steps = std::clamp(int(std::floor(254.0 / octaves)), kE8MinSteps, kE8MaxSteps);
  }
  t.top = float(top);
  t.steps_per_octave = steps;
  t.values[0] = 0.0f;
  for (int e = 1; e < kE8TableSize; ++e)
    t.values[size_t(e)] = float(double(t.top) * std::exp2(double(e - 255) / steps));
  return t;
}

void GroupRmsRange::Add(const float* w, int64_t rows, int64_t cols, int64_t g) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += g) {
      const float* x = w + r * cols + c0;
      double ss = 0;
      for (int64_t i = 0; i < g; ++i) ss += double(x[i]) * x[i];
      if (!(ss > 0)) continue;
      const double rms = std::sqrt(ss / double(g));
      if (hi == 0) {
        lo = hi = rms;
      } else {
        lo = std::min(lo, rms);
        hi = std::max(hi, rms);
      }
    }
  }
}

E8ScaleTable E8ScaleTableFor(const float* w, int64_t rows, int64_t cols, int64_t g) {
  GroupRmsRange range;
  range.Add(w, rows, cols, g);
  return range.Table();
}

uint8_t NearestE8Code(const E8ScaleTable& t, double s) {
  if (!(s > 0)) return 0;
  const double e = 255.0 + double(t.steps_per_octave) * std::log2(s / double(t.top));
  return uint8_t(std::clamp(std::lround(e), 1L, 255L));
}

void ValidateE8ScaleTable(const float* table, int64_t n, std::string_view where) {
  TQ_CHECK(n == kE8TableSize, where, "scale table has {} entries, expected {}", n, kE8TableSize);
  for (int64_t i = 0; i < n; ++i) {
    TQ_CHECK(std::isfinite(table[i]) && table[i] >= 0.0f, where,
             "scale table entry {} is {} (must be finite and >= 0)", i, table[i]);
  }
}

}  // namespace tq::quant
