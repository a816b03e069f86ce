#include "quant/vector_codebook.h"

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/codebook.h"
#include "quant/rng.h"

namespace tq::quant {
namespace {

std::vector<float> GaussianSamples(int64_t count, int dim, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> x(static_cast<size_t>(count * dim));
  for (auto& v : x) v = float(rng.Normal());
  return x;
}

double SquaredDistance(const float* a, const float* b, int dim) {
  double d = 0.0;
  for (int j = 0; j < dim; ++j) d += double(a[j] - b[j]) * double(a[j] - b[j]);
  return d;
}

}  // namespace

int VectorCodebook::Encode(const float* x) const {
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int k = 0; k < size(); ++k) {
    const double d = SquaredDistance(x, Decode(k), dim);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

VectorCodebook TrainGaussianVectorCodebook(int dim, int bits_per_dim,
                                           const VectorCodebookOptions& options) {
  TQ_CHECK(dim >= 1 && dim <= 8, "vector codebook", "dimension {} outside [1, 8]", dim);
  TQ_CHECK(bits_per_dim >= 1 && bits_per_dim <= 4 && bits_per_dim * dim <= 12, "vector codebook",
           "{} bits per coordinate in {} dimensions", bits_per_dim, dim);
  TQ_CHECK(options.num_samples > 0 && options.iterations >= 0, "vector codebook",
           "bad training options");
  const Codebook& scalar = GaussianCodebook(bits_per_dim);
  const int levels = scalar.size();
  const int k = 1 << (bits_per_dim * dim);
  VectorCodebook cb;
  cb.dim = dim;
  cb.bits_per_dim = bits_per_dim;
  cb.points.resize(size_t(k) * size_t(dim));
  for (int p = 0; p < k; ++p) {  // product start: coordinate j of point p = digit j of p
    for (int j = 0, rest = p; j < dim; ++j, rest /= levels)
      cb.points[size_t(p) * dim + j] = scalar.levels[size_t(rest % levels)];
  }
  const int64_t n = options.num_samples;
  const std::vector<float> x = GaussianSamples(n, dim, options.seed);
  std::vector<int> assign(static_cast<size_t>(n));
  for (int it = 0; it <= options.iterations; ++it) {
    ThreadPool::Global().ParallelFor(n, 1024, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) assign[size_t(i)] = cb.Encode(x.data() + i * dim);
    });
    double se = 0.0;
    std::vector<double> sum(cb.points.size(), 0.0);
    std::vector<int64_t> count(static_cast<size_t>(k), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int a = assign[size_t(i)];
      se += SquaredDistance(x.data() + i * dim, cb.Decode(a), dim);
      ++count[size_t(a)];
      for (int j = 0; j < dim; ++j) sum[size_t(a) * dim + j] += x[size_t(i * dim + j)];
    }
    cb.mse = se / double(n * dim);
    if (it == options.iterations) break;
    for (int p = 0; p < k; ++p) {  // empty cells keep their point
      if (count[size_t(p)] == 0) continue;
      for (int j = 0; j < dim; ++j)
        cb.points[size_t(p) * dim + j] = float(sum[size_t(p) * dim + j] / double(count[size_t(p)]));
    }
  }
  return cb;
}

const VectorCodebook& GaussianVectorCodebook(int dim, int bits_per_dim) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::unique_ptr<VectorCodebook>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{dim, bits_per_dim}];
  if (!slot)
    slot = std::make_unique<VectorCodebook>(TrainGaussianVectorCodebook(dim, bits_per_dim));
  return *slot;
}

double VectorCodebookMse(const VectorCodebook& cb, int num_vectors, uint64_t seed) {
  const std::vector<float> x = GaussianSamples(num_vectors, cb.dim, seed);
  std::vector<double> err(static_cast<size_t>(num_vectors));
  ThreadPool::Global().ParallelFor(num_vectors, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* v = x.data() + i * cb.dim;
      err[size_t(i)] = SquaredDistance(v, cb.Decode(cb.Encode(v)), cb.dim);
    }
  });
  double se = 0.0;
  for (double e : err) se += e;
  return se / (double(num_vectors) * cb.dim);
}

}  // namespace tq::quant
