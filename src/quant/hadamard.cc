#include "quant/hadamard.h"

#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
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

void CheckRotation(const HadamardSigns& signs, int64_t block, const char* where) {
  TQ_CHECK(IsPowerOfTwo(block), where, "block size {} is not a power of two", block);
  TQ_CHECK(signs.size() > 0 && signs.size() % block == 0, where,
           "dimension {} is not a positive multiple of the block size {}", signs.size(), block);
}

// x[0..n) <- diag(s) x * scale, then blockwise FWHT.
TQ_FWHT_CLONES void ForwardOne(const int8_t* s, int64_t n, int64_t block, float scale, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= scale * float(s[i]);
  for (int64_t b0 = 0; b0 < n; b0 += block) Fwht(x + b0, block);
}

TQ_FWHT_CLONES void InverseOne(const int8_t* s, int64_t n, int64_t block, float scale, float* x) {
  for (int64_t b0 = 0; b0 < n; b0 += block) Fwht(x + b0, block);
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
  TQ_CHECK(block > 0 && (block & (block - 1)) == 0 && n > 0 && n % block == 0,
           "hadamard rows forward", "dimension {} with block {}", n, block);
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
