// The scalar TurboQuant KV codec (kv_ops.h EncodeKvVector / EncodeQjlResidual): the arithmetic
// every backend's KvEncode reproduces (kernels/cuda/kv_encode.cu does the same operations, with
// its double sums in another order).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/kv_ops.h"
#include "quant/format.h"
#include "quant/packing.h"

namespace tq::kernels {
namespace {

// The segment holding channel i.
const KvCodeSegment& SegmentOf(const KvCodeFormat& f, int64_t i) {
  return f.segments[f.num_segments > 1 && i >= f.segments[0].end ? 1 : 0];
}

// #{t < v} over the segment's thresholds: the nearest level (a value on a threshold goes to the
// lower code, NaN to 0), as quant::Codebook::Encode.
uint8_t NearestCode(const KvCodeSegment& seg, float v) {
  const int last = quant::Traits(seg.format).levels - 1;
  const float* t = seg.thresholds;
  if (last > 16) return uint8_t(std::lower_bound(t, t + last, v) - t);
  int code = 0;
  for (int i = 0; i < last; ++i) code += v > t[i];
  return uint8_t(code);
}

// Codes of x[0..g) (channels c0 ..) at scale s; returns Σ (x - s·c)².
double Assign(const KvCodeFormat& f, const float* x, int64_t c0, float s, uint8_t* codes) {
  double err = 0;
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  for (int64_t i = 0; i < f.group; ++i) {
    const KvCodeSegment& seg = SegmentOf(f, c0 + i);
    codes[i] = NearestCode(seg, x[i] * inv);
    const double e = double(x[i]) - double(s) * seg.levels[codes[i]];
    err += e * e;
  }
  return err;
}

}  // namespace

void EncodeKvVector(const KvCodeFormat& f, KvScale scale, const float* x, uint8_t* codes,
                    uint16_t* scales) {
  const int64_t d = f.dim, g = f.group;
  uint8_t idx[1024], trial[1024];
  for (int64_t c0 = 0; c0 < d; c0 += g) {
    const float* xg = x + c0;
    double ss = 0;
    for (int64_t i = 0; i < g; ++i) ss += double(xg[i]) * xg[i];
    // The stored fp16 scale is what decoding sees, so codes are assigned against it.
    uint16_t best = F32ToF16(float(std::sqrt(ss / double(g))));
    if (!std::isfinite(F16ToF32(best))) best = F32ToF16(65504.0f);
    double best_err = Assign(f, xg, c0, F16ToF32(best), idx + c0);
    if (scale != KvScale::kNorm) {
      uint16_t s = best;
      for (int round = 0; round < 3; ++round) {
        Assign(f, xg, c0, F16ToF32(s), trial + c0);
        double xc = 0, cc = 0;
        for (int64_t i = 0; i < g; ++i) {
          const double c = SegmentOf(f, c0 + i).levels[trial[c0 + i]];
          xc += double(xg[i]) * c;
          cc += c * c;
        }
        if (cc <= 0 || xc <= 0) break;
        const uint16_t next = F32ToF16(float(xc / cc));
        if (next == s || !std::isfinite(F16ToF32(next))) break;
        s = next;
        const double err = Assign(f, xg, c0, F16ToF32(s), trial + c0);
        if (err < best_err) {
          best_err = err;
          best = s;
          std::copy_n(trial + c0, g, idx + c0);
        }
      }
    }
    if (scale == KvScale::kUnbiased) {
      // Keep the codes, rescale so that the projection of x̂ on x is x itself.
      double xc = 0;
      for (int64_t i = 0; i < g; ++i)
        xc += double(xg[i]) * SegmentOf(f, c0 + i).levels[idx[c0 + i]];
      const uint16_t s = F32ToF16(float(ss / xc));
      if (xc > 0 && std::isfinite(F16ToF32(s))) best = s;
    }
    scales[c0 / g] = best;
  }
  for (int s = 0; s < f.num_segments; ++s) {
    const KvCodeSegment& seg = f.segments[s];
    quant::PackCodes(seg.format, idx + seg.begin, seg.end - seg.begin, codes + seg.byte_offset);
  }
}

void EncodeQjlResidual(const float* s, int64_t m, int64_t dim, const float* residual, uint8_t* bits,
                       uint16_t* norm) {
  double rr = 0;
  for (int64_t i = 0; i < dim; ++i) rr += double(residual[i]) * residual[i];
  float sr[1024];
  QjlProject(s, m, dim, residual, sr);
  std::memset(bits, 0, size_t(QjlSignBytes(m)));
  for (int64_t j = 0; j < m; ++j)
    if (sr[j] >= 0) bits[j >> 3] = uint8_t(bits[j >> 3] | 1u << (j & 7));
  *norm = F32ToF16(float(std::sqrt(rr)));
  if (!std::isfinite(F16ToF32(*norm))) *norm = F32ToF16(65504.0f);
}

}  // namespace tq::kernels
