// Shared by the packed-kernel tests: a random packed matrix (codes, fp16 or e8 scales, minimums,
// the Gaussian codebook) that owns its storage, and an RAII scope that forces an ISA level.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/packed_ops.h"
#include "quant/codebook.h"
#include "quant/packing.h"
#include "quant/quantized_matrix.h"

namespace tq::kernels::test {

using quant::CodeFormat;

// Group scale encodings (docs/FORMAT.md "Group scales").
enum class Scales { kF16, kE8 };

// The e8 table of the tests: a log grid 0.002 · 2^(i / 32) (0.002 .. 0.51).
inline std::vector<float> E8TestTable() {
  std::vector<float> t(256);
  for (int i = 0; i < 256; ++i) t[size_t(i)] = 0.002f * std::exp2(float(i) / 32.0f);
  return t;
}

struct Owned {
  quant::QuantizedMatrix q;          // fp16 scales (with kE8: unused by the view)
  std::vector<uint8_t> scale_codes;  // kE8: [rows, cols / g]
  std::vector<float> scale_table;    // kE8: [256]
  PackedMatrix view;
};

// Random codes, scales (and minimums) for a [rows, cols] matrix. kE8 (codebook method only): the
// view carries e8 scale codes (uniform over those of E8TestTable between 0.01 and 0.2, or over
// all 256 when `table` is given) into `table` (default E8TestTable()) instead of fp16 scales.
inline Owned RandomPacked(quant::QuantMethod method, CodeFormat f, int64_t rows, int64_t cols,
                          int64_t g, uint32_t seed, Scales scales = Scales::kF16,
                          const std::vector<float>* table = nullptr) {
  std::mt19937 rng(seed);
  Owned o;
  quant::QuantizedMatrix& q = o.q;
  q.method = method;
  q.format = f;
  q.rows = rows;
  q.cols = cols;
  q.group_size = int(g);
  const int levels = quant::Traits(f).levels;
  std::vector<uint8_t> codes(static_cast<size_t>(cols));
  q.codes.resize(size_t(rows) * quant::PackedBytes(f, cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& c : codes) c = uint8_t(rng() % uint32_t(levels));
    quant::PackCodes(f, codes.data(), cols, q.codes.data() + r * quant::PackedBytes(f, cols));
  }
  std::uniform_real_distribution<float> u(0.01f, 0.2f);
  for (int64_t i = 0; i < rows * (cols / g); ++i) {
    q.scales.push_back(F32ToF16(u(rng)));
    if (method == quant::QuantMethod::kAffine)  // about centred on 0
      q.mins.push_back(F32ToF16(-u(rng) * float(levels) / 2));
  }
  if (method == quant::QuantMethod::kCodebook) q.codebook = quant::GaussianCodebook(f).levels;
  q.Validate("test");
  PackedMatrix& v = o.view;
  v.method = method;
  v.format = f;
  v.rows = rows;
  v.cols = cols;
  v.group_size = g;
  v.codes = q.codes.data();
  v.row_bytes = int64_t(quant::PackedBytes(f, cols));
  v.scales = q.scales.data();
  if (scales == Scales::kE8) {
    o.scale_table = table ? *table : E8TestTable();
    const uint32_t lo = table ? 0 : 74, hi = table ? 255 : 212;  // 0.002·2^(74/32) ≈ 0.01
    for (int64_t i = 0; i < rows * (cols / g); ++i)
      o.scale_codes.push_back(uint8_t(lo + rng() % (hi - lo + 1)));
    v.scales = nullptr;
    v.scale_codes = o.scale_codes.data();
    v.scale_table = o.scale_table.data();
  }
  v.mins = q.mins.empty() ? nullptr : q.mins.data();
  v.codebook = q.codebook.empty() ? nullptr : q.codebook.data();
  return o;
}

// o with the linear q8 codebook (convert's q8 tier: level c = (c - 128) · step) instead of the
// Gaussian one, and the view's linear_q8_step set as PackedLinear sets it.
inline void UseLinearQ8Codebook(Owned& o) {
  o.q.codebook = quant::LinearQ8Codebook().levels;
  o.view.codebook = o.q.codebook.data();
  o.view.linear_q8_step = o.q.codebook[129];
}

class IsaScope {
 public:
  explicit IsaScope(cpu::Isa isa) : saved_(cpu::ActiveIsa()) { cpu::SetActiveIsa(isa); }
  ~IsaScope() { cpu::SetActiveIsa(saved_); }

 private:
  cpu::Isa saved_;
};

}  // namespace tq::kernels::test
