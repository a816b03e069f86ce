#include "quant/hadamard.h"

#include <array>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/hadamard_blocks.h"
#include "quant/rng.h"

// The transform is cloned per x86 ISA level (AVX-512, AVX2, baseline) and the loader picks one:
// the butterfly loops vectorise with the wider registers.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define TQ_FWHT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TQ_FWHT_CLONES
#endif

namespace tq::quant {
namespace {

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// The matrices of SmallHadamard, one row per word: bit j set = entry (row, j) is -1.
constexpr std::array<uint32_t, 12> kH12 = {0x0000002, 0x0000aab, 0x00003c8, 0x000096e,
                                           0x0000f20, 0x00005ba, 0x0000c8c, 0x00006e6,
                                           0x000023c, 0x0000b96, 0x00008f0, 0x0000e5a};
constexpr std::array<uint32_t, 20> kH20 = {0x00933de, 0x002e3bd, 0x005477b, 0x00a0ef7, 0x00499ef,
                                           0x00637c1, 0x00c6ba2, 0x008d764, 0x001aee8, 0x00359f0,
                                           0x000fa53, 0x00174a7, 0x0026d4e, 0x0045e9c, 0x0083d39,
                                           0x00f7a6d, 0x00ef4fa, 0x00dedd5, 0x00bdf8b, 0x007bf36};
constexpr std::array<uint32_t, 28> kH28 = {
    0xcd69e7e, 0x9ad7c7d, 0x37ab8fb, 0x6d571f7, 0xd8ae3ef, 0xb3587df, 0x66b4f3f,
    0xb467f43, 0x6acbe87, 0xd593d8e, 0xab27b9c, 0x564f7b8, 0xac9aff0, 0x5b31fe1,
    0x87fb325, 0x0ff66ca, 0x1decd95, 0x39ddb2a, 0x71bf654, 0xe17eca9, 0xc2fd9d2,
    0xfcf1299, 0xfbe2532, 0xf7c4ae4, 0xef8d549, 0xdf1ea13, 0xbe3d4a6, 0x7e7a94c};

template <size_t M>
std::vector<int8_t> Expand(const std::array<uint32_t, M>& rows) {
  std::vector<int8_t> h(M * M);
  for (size_t r = 0; r < M; ++r)
    for (size_t c = 0; c < M; ++c) h[r * M + c] = (rows[r] >> c & 1) ? -1 : 1;
  return h;
}

void CheckRotation(const HadamardSigns& signs, int64_t block, const char* where) {
  TQ_CHECK(IsHadamardBlock(block), where,
           "block size {} is not m x 2^k with m in {{1, 12, 20, 28}}", block);
  TQ_CHECK(signs.size() > 0 && signs.size() % block == 0, where,
           "dimension {} is not a positive multiple of the block size {}", signs.size(), block);
}

// The m-point half of H_m ⊗ H_{2^k} on x viewed as [m][p] (p = 2^k): column i <- H x[:, i]
// (Hᵀ when transpose), through `tmp` [m * p]. Rows of p floats are contiguous, so the inner loop
// vectorises.
TQ_FWHT_CLONES void SmallTransform(const int8_t* h, int64_t m, int64_t p, bool transpose, float* x,
                                   float* tmp) {
  for (int64_t j = 0; j < m; ++j) {
    float* out = tmp + j * p;
    for (int64_t i = 0; i < p; ++i) out[i] = 0.0f;
    for (int64_t k = 0; k < m; ++k) {
      const float sign = float(transpose ? h[k * m + j] : h[j * m + k]);
      const float* in = x + k * p;
      for (int64_t i = 0; i < p; ++i) out[i] += sign * in[i];
    }
  }
  for (int64_t i = 0; i < m * p; ++i) x[i] = tmp[i];
}

// One block: H_b x (or H_bᵀ x), unscaled.
void BlockTransform(float* x, int64_t block, int64_t m, bool transpose, float* tmp) {
  if (m == 1) return Fwht(x, block);
  const int64_t p = block / m;
  for (int64_t r = 0; r < m; ++r) Fwht(x + r * p, p);
  SmallTransform(SmallHadamard(m).data(), m, p, transpose, x, tmp);
}

// Every block of x[0..n) transformed (a per-thread scratch block for m > 1).
void Blocks(float* x, int64_t n, int64_t block, bool transpose) {
  const int64_t m = HadamardBlockFactor(block);
  thread_local std::vector<float> tmp;
  if (m > 1 && tmp.size() < size_t(block)) tmp.resize(size_t(block));
  for (int64_t b0 = 0; b0 < n; b0 += block) BlockTransform(x + b0, block, m, transpose, tmp.data());
}

// x[0..n) <- diag(s) x * scale, then the blockwise transform.
TQ_FWHT_CLONES void ForwardOne(const int8_t* s, int64_t n, int64_t block, float scale, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= scale * float(s[i]);
  Blocks(x, n, block, false);
}

TQ_FWHT_CLONES void InverseOne(const int8_t* s, int64_t n, int64_t block, float scale, float* x) {
  Blocks(x, n, block, true);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale * float(s[i]);
}

}  // namespace

int64_t HadamardBlockSize(int64_t n, int64_t max_block) {
  TQ_CHECK(n > 0, "hadamard", "dimension must be positive, got {}", n);
  TQ_CHECK(max_block >= 1, "hadamard", "max block must be >= 1, got {}", max_block);
  int64_t b = n & -n;  // lowest set bit = largest power of two dividing n
  while (b > max_block) b >>= 1;
  return b;
}

bool IsHadamardBlock(int64_t b) { return HadamardBlockFactor(b) != 0; }

int64_t HadamardBlockFactor(int64_t b) {
  for (int64_t m : {1, 12, 20, 28})
    if (b > 0 && b % m == 0 && IsPowerOfTwo(b / m)) return m;
  return 0;
}

std::span<const int8_t> SmallHadamard(int64_t m) {
  static const std::vector<int8_t> h12 = Expand(kH12), h20 = Expand(kH20), h28 = Expand(kH28);
  switch (m) {
    case 12:
      return h12;
    case 20:
      return h20;
    case 28:
      return h28;
    default:
      Fail("hadamard", "no {0} x {0} Hadamard matrix here (12, 20, 28)", m);
  }
}

void HadamardBlockTransform(float* x, int64_t b, bool transpose) {
  const int64_t m = HadamardBlockFactor(b);
  TQ_CHECK(m != 0, "hadamard", "block size {} is not m x 2^k with m in {{1, 12, 20, 28}}", b);
  std::vector<float> tmp(m > 1 ? size_t(b) : 0);
  BlockTransform(x, b, m, transpose, tmp.data());
}

TQ_FWHT_CLONES void Fwht(float* x, int64_t n) {
  // Two butterfly stages per pass over memory (radix 4): half the loads and stores of radix 2.
  int64_t h = 1;
  for (; 4 * h <= n; h *= 4) {
    for (int64_t i = 0; i < n; i += 4 * h) {
      float* x0 = x + i;
      float* x1 = x0 + h;
      float* x2 = x1 + h;
      float* x3 = x2 + h;
      for (int64_t j = 0; j < h; ++j) {
        const float a = x0[j] + x1[j], b = x0[j] - x1[j];
        const float c = x2[j] + x3[j], d = x2[j] - x3[j];
        x0[j] = a + c;
        x1[j] = b + d;
        x2[j] = a - c;
        x3[j] = b - d;
      }
    }
  }
  if (h < n) {  // one radix-2 stage left when log2(n) is odd
    for (int64_t i = 0; i < n; i += 2 * h) {
      float* lo = x + i;
      float* hi = x + i + h;
      for (int64_t j = 0; j < h; ++j) {
        const float a = lo[j], b = hi[j];
        lo[j] = a + b;
        hi[j] = a - b;
      }
    }
  }
}

void FwhtOrthonormal(float* x, int64_t n) {
  Fwht(x, n);
  const float scale = float(1.0 / std::sqrt(double(n)));
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

HadamardSigns HadamardSigns::Generate(int64_t n, uint64_t seed) {
  TQ_CHECK(n >= 0, "hadamard signs", "negative dimension {}", n);
  HadamardSigns s;
  s.values_.resize(size_t(n));
  SplitMix64 rng(seed);
  uint64_t word = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 64 == 0) word = rng.Next();
    s.values_[size_t(i)] = (word >> (i % 64) & 1) ? -1 : 1;
  }
  return s;
}

HadamardSigns HadamardSigns::AllPlus(int64_t n) {
  TQ_CHECK(n >= 0, "hadamard signs", "negative dimension {}", n);
  HadamardSigns s;
  s.values_.assign(size_t(n), 1);
  return s;
}

HadamardSigns HadamardSigns::FromBits(std::span<const uint8_t> bits, int64_t n) {
  TQ_CHECK(n >= 0, "hadamard signs", "negative dimension {}", n);
  TQ_CHECK(bits.size() == size_t((n + 7) / 8), "hadamard signs",
           "{} bytes of sign bits for dimension {} (expected {})", bits.size(), n, (n + 7) / 8);
  if (n % 8 != 0) {
    TQ_CHECK((bits.back() >> (n % 8)) == 0, "hadamard signs",
             "padding bits set in the last byte (0x{:02x}) for dimension {}", bits.back(), n);
  }
  HadamardSigns s;
  s.values_.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    s.values_[size_t(i)] = (bits[size_t(i / 8)] >> (i % 8) & 1) ? -1 : 1;
  return s;
}

HadamardSigns HadamardSigns::FromInt8(std::span<const int8_t> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    TQ_CHECK(values[i] == 1 || values[i] == -1, "hadamard signs", "value {} at index {} is not ±1",
             values[i], i);
  }
  HadamardSigns s;
  s.values_.assign(values.begin(), values.end());
  return s;
}

std::vector<uint8_t> HadamardSigns::ToBits() const {
  std::vector<uint8_t> bits(size_t((size() + 7) / 8), 0);
  for (int64_t i = 0; i < size(); ++i)
    if (values_[size_t(i)] < 0) bits[size_t(i / 8)] |= uint8_t(1u << (i % 8));
  return bits;
}

void RotateForward(const HadamardSigns& signs, int64_t block, float* x) {
  CheckRotation(signs, block, "hadamard forward");
  ForwardOne(signs.data(), signs.size(), block, float(1.0 / std::sqrt(double(block))), x);
}

void RotateInverse(const HadamardSigns& signs, int64_t block, float* x) {
  CheckRotation(signs, block, "hadamard inverse");
  InverseOne(signs.data(), signs.size(), block, float(1.0 / std::sqrt(double(block))), x);
}

void RotateRowsForward(const HadamardSigns& signs, int64_t block, float* w, int64_t rows) {
  CheckRotation(signs, block, "hadamard rows forward");
  RotateRowsForward(signs.data(), signs.size(), block, w, rows);
}

void RotateRowsForward(const int8_t* signs, int64_t n, int64_t block, float* w, int64_t rows) {
  TQ_CHECK(IsHadamardBlock(block) && n > 0 && n % block == 0, "hadamard rows forward",
           "dimension {} with block {}", n, block);
  const float scale = float(1.0 / std::sqrt(double(block)));
  ThreadPool::Global().ParallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ForwardOne(signs, n, block, scale, w + r * n);
  });
}

void RotateRowsInverse(const HadamardSigns& signs, int64_t block, float* w, int64_t rows) {
  CheckRotation(signs, block, "hadamard rows inverse");
  const int64_t n = signs.size();
  const float scale = float(1.0 / std::sqrt(double(block)));
  ThreadPool::Global().ParallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) InverseOne(signs.data(), n, block, scale, w + r * n);
  });
}

HadamardRotation::HadamardRotation(HadamardSigns signs, int64_t block)
    : signs_(std::move(signs)), block_(block) {
  CheckRotation(signs_, block_, "hadamard rotation");
}

HadamardRotation HadamardRotation::Make(int64_t n, uint64_t seed, int64_t max_block) {
  return HadamardRotation(HadamardSigns::Generate(n, seed), HadamardBlockSize(n, max_block));
}

}  // namespace tq::quant
