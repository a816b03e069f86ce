// Vector codebooks (beyond the paper): K points in ℝ^dim quantizing `dim` consecutive rotated,
// normalised coordinates at once (≈ i.i.d. N(0,1)). Trained by Lloyd's algorithm (k-means) on
// Gaussian samples from a fixed seed, started from the product of the scalar Lloyd-Max codebook
// (so on the training set it is never worse than scalar). Bits per coordinate = log2(K) / dim.
// Experimental: the checkpoint format does not carry vector codes yet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tq::quant {

struct VectorCodebook {
  int dim = 0;
  int bits_per_dim = 0;       // log2(size()) / dim
  std::vector<float> points;  // [size(), dim]
  double mse = 0.0;           // per coordinate, on the training samples

  int size() const { return dim > 0 ? int(points.size()) / dim : 0; }
  // Index of the nearest point to x[0..dim) (squared Euclidean; ties to the lower index).
  int Encode(const float* x) const;
  const float* Decode(int index) const { return points.data() + size_t(index) * size_t(dim); }
};

struct VectorCodebookOptions {
  int num_samples = 100000;  // training vectors
  int iterations = 40;
  uint64_t seed = 1;
};

// dim in [1, 8]; bits_per_dim * dim in [1, 12] (K = 2^(bits_per_dim * dim) points); the scalar
// Gaussian codebook with 2^bits_per_dim levels must exist (bits_per_dim in {1, 2, 3, 4}).
VectorCodebook TrainGaussianVectorCodebook(int dim, int bits_per_dim,
                                           const VectorCodebookOptions& options = {});

// The trained book for (dim, bits_per_dim) with default options, cached (thread-safe; training
// takes up to seconds for 256+ points).
const VectorCodebook& GaussianVectorCodebook(int dim, int bits_per_dim);

// Mean squared error per coordinate of `cb` on `num_vectors` fresh N(0, I) vectors (seeded).
double VectorCodebookMse(const VectorCodebook& cb, int num_vectors, uint64_t seed);

}  // namespace tq::quant
