// Randomized Hadamard transform (RHT), blockwise.
//
// For a dimension n, the block size b divides n: a power of two (HadamardBlockSize; what our
// converter makes) or, for turboquant-mlx imports, m · 2^k with m in {12, 20, 28}
// (quant/hadamard_blocks.h). The
// rotation of a vector x ∈ ℝ^n is
//   R x = blockdiag(H_b, ..., H_b) · diag(s) · x / √b
// with H_b the ±1 Sylvester–Hadamard matrix (H_1 = [1], H_2k = [[H_k, H_k], [H_k, -H_k]]; entry
// (i, j) = (-1)^popcount(i & j)) and s ∈ {±1}^n a stored sign vector. R is orthogonal, so
// R⁻¹ = Rᵀ = diag(s) · blockdiag(H_b) / √b.
//
// For a linear layer y = W x with W [out, in]: W' = W Rᵀ gives y = W' (R x). Row i of W' is
// R w_i, so rotating weight rows is the same operation as rotating an input vector
// (RotateRowsForward). At run time the input is rotated once and weights are never un-rotated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tq::quant {

inline constexpr int64_t kDefaultMaxHadamardBlock = 4096;

// The largest power of two that divides n and is <= max_block (max_block is rounded down to a
// power of two). n must be > 0. E.g. 1408 -> 128, 96 -> 32, 14336 -> 2048, 18944 -> 512.
int64_t HadamardBlockSize(int64_t n, int64_t max_block = kDefaultMaxHadamardBlock);

// In-place fast Walsh–Hadamard transform of x[0..n), n a power of two: x <- H_n x (no scaling;
// ‖H_n x‖ = √n ‖x‖). FwhtOrthonormal scales by 1/√n.
void Fwht(float* x, int64_t n);
void FwhtOrthonormal(float* x, int64_t n);

// The ±1 vector s of one rotation. Generated once by the converter / KV cache from a seed and
// then stored (as bits); loaders use FromBits and never re-derive it.
//
// Generate(n, seed): word k = the k-th output of SplitMix64(seed) (k = 0, 1, ...); s_i = -1 if bit
// (i mod 64) of word i/64 is set, else +1. Bit encoding (ToBits/FromBits): ceil(n/8) bytes, s_i
// is bit (i mod 8) of byte i/8 (LSB first), 1 = -1, 0 = +1; padding bits are 0.
class HadamardSigns {
 public:
  HadamardSigns() = default;
  static HadamardSigns Generate(int64_t n, uint64_t seed);
  static HadamardSigns AllPlus(int64_t n);
  // Throws tq::Error if bits.size() != ceil(n/8) or a padding bit is set.
  static HadamardSigns FromBits(std::span<const uint8_t> bits, int64_t n);
  // Throws tq::Error if a value is not ±1.
  static HadamardSigns FromInt8(std::span<const int8_t> values);

  int64_t size() const { return int64_t(values_.size()); }
  const int8_t* data() const { return values_.data(); }  // [n], each ±1
  int8_t operator[](int64_t i) const { return values_[size_t(i)]; }
  std::vector<uint8_t> ToBits() const;
  bool operator==(const HadamardSigns&) const = default;

 private:
  std::vector<int8_t> values_;
};

// x[0..n) <- R x  (signs.size() == n; n % block == 0; block IsHadamardBlock).
void RotateForward(const HadamardSigns& signs, int64_t block, float* x);
// x[0..n) <- Rᵀ x (the inverse).
void RotateInverse(const HadamardSigns& signs, int64_t block, float* x);
// Each of `rows` rows of w [rows, n] (row-major): w_i <- R w_i, i.e. W <- W Rᵀ. Parallel over rows.
void RotateRowsForward(const HadamardSigns& signs, int64_t block, float* w, int64_t rows);
// The same on a raw sign array s[0..n) (each ±1): what kernels see (kernels::RotationView).
void RotateRowsForward(const int8_t* signs, int64_t n, int64_t block, float* w, int64_t rows);
// The inverse of RotateRowsForward: W <- W R.
void RotateRowsInverse(const HadamardSigns& signs, int64_t block, float* w, int64_t rows);

// A sign vector with its block size: what one sharing group of linears (or one KV layer) uses.
class HadamardRotation {
 public:
  HadamardRotation() = default;
  // Validates: block IsHadamardBlock (hadamard_blocks.h) and dividing signs.size().
  HadamardRotation(HadamardSigns signs, int64_t block);
  // Generate(n, seed) with HadamardBlockSize(n, max_block).
  static HadamardRotation Make(int64_t n, uint64_t seed,
                               int64_t max_block = kDefaultMaxHadamardBlock);

  int64_t dim() const { return signs_.size(); }
  int64_t block() const { return block_; }
  const HadamardSigns& signs() const { return signs_; }

  void Forward(float* x) const { RotateForward(signs_, block_, x); }
  void Inverse(float* x) const { RotateInverse(signs_, block_, x); }
  void ForwardRows(float* w, int64_t rows) const { RotateRowsForward(signs_, block_, w, rows); }
  void InverseRows(float* w, int64_t rows) const { RotateRowsInverse(signs_, block_, w, rows); }

 private:
  HadamardSigns signs_;
  int64_t block_ = 1;
};

}  // namespace tq::quant
