#include "kv/turboquant_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/half.h"
#include "quant/hadamard.h"
#include "quant/packing.h"

namespace tq {
namespace {

// 256 levels (c - 127.5) * step, step minimizing the MSE under `density` (golden section; the
// MSE is unimodal in the step: granular error grows, overload error shrinks).
quant::Codebook UniformCodebook(const quant::Density& density) {
  auto make = [](double step) {
    std::vector<float> levels(256);
    for (int c = 0; c < 256; ++c) levels[size_t(c)] = float((c - 127.5) * step);
    return quant::CodebookFromLevels(std::move(levels));
  };
  auto mse = [&](double step) { return quant::CodebookMse(make(step), density); };
  double a = 0.005, b = 0.1;
  const double r = (std::sqrt(5.0) - 1) / 2;
  double x1 = b - r * (b - a), x2 = a + r * (b - a), f1 = mse(x1), f2 = mse(x2);
  for (int it = 0; it < 40; ++it) {
    if (f1 < f2) {
      b = x2, x2 = x1, f2 = f1, x1 = b - r * (b - a), f1 = mse(x1);
    } else {
      a = x1, x1 = x2, f1 = f2, x2 = a + r * (b - a), f2 = mse(x2);
    }
  }
  quant::Codebook book = make((a + b) / 2);
  book.mse = mse((a + b) / 2);
  return book;
}

// Codebooks by (kind, group dim, bits), built once per process. The Lloyd-Max ones are the quant
// layer's cached tables (not owned here).
std::shared_ptr<const quant::Codebook> KvCodebookFor(KvCodebook kind, int64_t group, int bits) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int>, std::shared_ptr<const quant::Codebook>> cache;
  const auto key = std::make_tuple(int(kind), kind == KvCodebook::kSphere ? group : 0, bits);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::shared_ptr<const quant::Codebook> book;
  const bool sphere = kind == KvCodebook::kSphere && group >= 4;
  if (bits == 8) {
    book = sphere ? std::make_shared<quant::Codebook>(
                        UniformCodebook(quant::SphereCoordinateDensity(int(group))))
                  : std::make_shared<quant::Codebook>(UniformCodebook(quant::GaussianDensity()));
  } else {
    const quant::Codebook& q =
        sphere ? quant::SphereCodebook(int(group), bits) : quant::GaussianCodebook(bits);
    book = std::shared_ptr<const quant::Codebook>(&q, [](const quant::Codebook*) {});
  }
  cache.emplace(key, book);
  return book;
}

}  // namespace

bool IsValidKvBits(double bits) {
  for (double b : {2.0, 2.5, 3.0, 3.5, 4.0, 8.0})
    if (bits == b) return true;
  return false;
}

bool IsValidKvCodecBits(double bits) { return IsValidKvBits(bits) || bits == 1.0 || bits == 1.5; }

int64_t KvScaleGroup(int64_t head_dim) {
  if (head_dim <= 128 && (head_dim & (head_dim - 1)) == 0) return head_dim;
  return quant::HadamardBlockSize(head_dim, 128);
}

std::optional<KvOutlierWidths> KvOutlierSplit(int64_t dim, double bits, int64_t outliers) {
  if (!KvOutlierCountProblem(dim, outliers).empty()) return std::nullopt;
  // In half bits, so that 2.5 / 3.5 compare exactly.
  const int64_t total = int64_t(std::llround(bits * 2)) * dim;
  if (double(total) != bits * 2 * double(dim)) return std::nullopt;
  for (int lo = 4; lo >= 1; --lo)
    for (int hi = lo + 1; hi <= 4; ++hi)
      if (2 * (outliers * hi + (dim - outliers) * lo) == total) return KvOutlierWidths{hi, lo};
  return std::nullopt;
}

std::string KvOutlierCountProblem(int64_t dim, int64_t outliers) {
  if (outliers <= 0 || outliers >= dim)
    return fmt::format("{} outlier channels: needs 0 < N < head_dim {}", outliers, dim);
  if (outliers % 32 != 0)
    return fmt::format(
        "{} outlier channels: N must be a multiple of 32 (codes pack in units of 32)", outliers);
  return {};
}

int64_t KvOutlierGroup(int64_t dim, int64_t outliers) {
  int64_t g = 128;
  while (g > 1 && (outliers % g != 0 || (dim - outliers) % g != 0)) g /= 2;
  return g;
}

KvVectorCodec::KvVectorCodec(int64_t dim, double bits, KvScale scale, KvCodebook codebook)
    : bits_(bits), scale_(scale) {
  TQ_CHECK(IsValidKvCodecBits(bits), "kv codec",
           "unsupported bit width {} (1, 1.5, 2, 2.5, 3, 3.5, 4 or 8)", bits);
  TQ_CHECK(dim >= 2 && dim <= 1024, "kv codec", "head_dim {} outside [2, 1024]", dim);
  const int lo_bits = int(std::floor(bits));
  const bool split = bits != double(lo_bits);
  // Fractional widths: channels [0, dim/2) at lo_bits + 1, [dim/2, dim) at lo_bits.
  Init(dim, KvScaleGroup(dim), split ? dim / 2 : dim, split ? lo_bits + 1 : lo_bits, lo_bits,
       codebook);
}

KvVectorCodec::KvVectorCodec(int64_t dim, int64_t outliers, KvOutlierWidths w, KvScale scale,
                             KvCodebook codebook)
    : bits_(double(outliers * w.hi + (dim - outliers) * w.lo) / double(dim)),
      outliers_(outliers),
      scale_(scale) {
  TQ_CHECK(dim >= 2 && dim <= 1024, "kv codec", "head_dim {} outside [2, 1024]", dim);
  const std::string problem = KvOutlierCountProblem(dim, outliers);
  TQ_CHECK(problem.empty(), "kv codec", "{}", problem);
  TQ_CHECK(w.lo >= 1 && w.hi > w.lo && w.hi <= 4, "kv codec", "outlier widths {} / {} bits", w.hi,
           w.lo);
  Init(dim, KvOutlierGroup(dim, outliers), outliers, w.hi, w.lo, codebook);
}

void KvVectorCodec::Init(int64_t dim, int64_t group, int64_t cut, int hi, int lo,
                         KvCodebook codebook) {
  kernels::KvCodeFormat& f = format_;
  f.dim = dim;
  f.group = group;
  f.num_segments = cut < dim ? 2 : 1;
  int64_t offset = 0;
  for (int s = 0; s < f.num_segments; ++s) {
    kernels::KvCodeSegment& seg = f.segments[s];
    const int b = s == 0 ? hi : lo;
    seg.begin = s == 0 ? 0 : cut;
    seg.end = s == 0 ? cut : dim;
    seg.format = *quant::FormatForBits(b);
    segments_[s].book = KvCodebookFor(codebook, f.group, b);
    seg.levels = segments_[s].book->levels.data();
    seg.thresholds = segments_[s].book->thresholds.data();
    seg.byte_offset = offset;
    seg.uniform = b == 8;
    seg.lo = seg.levels[0];
    seg.step = seg.levels[1] - seg.levels[0];
    offset += int64_t(quant::PackedBytes(seg.format, seg.end - seg.begin));
  }
  f.code_bytes = offset;
}

void KvVectorCodec::Encode(const float* rotated, uint8_t* codes, uint16_t* scales) const {
  kernels::EncodeKvVector(format_, scale_, rotated, codes, scales);
}

}  // namespace tq
