// Shared by the packed-kernel tests: a random packed matrix (codes, fp16 scales and minimums, the
// Gaussian codebook) that owns its storage, and an RAII scope that forces an ISA level.
#pragma once

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

struct Owned {
  quant::QuantizedMatrix q;
  PackedMatrix view;
};

// Random codes, scales (and minimums) for a [rows, cols] matrix.
inline Owned RandomPacked(quant::QuantMethod method, CodeFormat f, int64_t rows, int64_t cols,
                          int64_t g, uint32_t seed) {
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
    if (method == quant::QuantMethod::kAffine) q.mins.push_back(F32ToF16(-u(rng) * 4));
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
  v.mins = q.mins.empty() ? nullptr : q.mins.data();
  v.codebook = q.codebook.empty() ? nullptr : q.codebook.data();
  return o;
}

class IsaScope {
 public:
  explicit IsaScope(cpu::Isa isa) : saved_(cpu::ActiveIsa()) { cpu::SetActiveIsa(isa); }
  ~IsaScope() { cpu::SetActiveIsa(saved_); }

 private:
  cpu::Isa saved_;
};

}  // namespace tq::kernels::test
