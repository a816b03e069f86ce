#include "runtime/plan/budget_projection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quant/format.h"
#include "quant/packing.h"

namespace tq {
namespace {

// Candidate groups and bits the allocator tries (BudgetOptions' defaults; e8 scales add 16).
constexpr int kGroups[] = {16, 32, 64, 128};
constexpr int kMaxBits = 8;
constexpr int64_t kMaxCodebookBytes = (int64_t(1) << kMaxBits) * 4;  // fp32 codebook at 8 bits

// Bits per weight (codes + group scales + e8 table) of `bits`-bit codes in groups of g of a
// [rows, cols] linear.
double CodeBpw(int bits, int g, int64_t rows, int64_t cols, quant::ScaleFormat sf) {
  return LinearStoredBits(rows, cols, *quant::FormatForBits(bits), g, quant::QuantMethod::kCodebook,
                          sf) /
         (double(rows) * double(cols));
}

}  // namespace

BudgetBound BoundBitBudget(const QuantRecipe& recipe, double x) {
  const std::string flag = fmt::format("--budget-bpw {}", x);
  if (!(x >= 1.6)) throw UsageError(flag, "must be >= 1.6");
  const QuantRecipeOptions& ro = recipe.options;
  if (ro.method != quant::QuantMethod::kCodebook)
    throw UsageError(flag, "needs --method turboquant");
  BudgetBound b;
  double weights = 0, expert_weights = 0, fixed_bits = 0, cheapest_bits = 0, ceiling_bits = 0;
  int64_t overhead = 0;  // codebooks and sign vectors: not part of the budget
  for (const TensorDecision& d : recipe.tensors) {
    if (!IsDecoderLinear(d.role) || d.shape.size() != 2) continue;
    const int64_t cols = d.shape[1];
    const double n = double(d.shape[0]) * double(cols);
    weights += n;
    if (IsExpert(d.role)) expert_weights += n;
    b.linear_bytes_before += d.projected_bytes;
    if (!d.quantize) {  // kept as stored: counts at its own size
      fixed_bits += 8.0 * double(d.source_bytes);
      continue;
    }
    const int64_t rows = d.shape[0];
    const quant::ScaleFormat sf = d.scale_format;
    const int64_t core = QuantizedTensorBytes(rows, cols, *d.format, d.group_size, ro.method, sf);
    overhead += d.projected_bytes - core;           // its sign vector, if it stores its group's
    if (d.format == quant::CodeFormat::kTernary) {  // fixed at its own cost
      fixed_bits += LinearStoredBits(rows, cols, *d.format, d.group_size, ro.method, sf);
      overhead += int64_t(quant::Traits(*d.format).levels) * 4;  // its fp32 codebook
      continue;
    }
    overhead += kMaxCodebookBytes;
    // The allocator keeps each tensor's rotation block; groups that would change it are skipped.
    double lo = 1e30, hi = 0;
    for (int g : kGroups) {
      if (g == 16 && sf != quant::ScaleFormat::kE8) continue;
      const GroupChoice gc = ChooseGroup(cols, g, ro.rotation, ro.max_hadamard_block);
      if (!gc.quantizable || gc.group_size != g || gc.rotation_block != d.rotation_block) continue;
      lo = std::min(lo, CodeBpw(2, g, rows, cols, sf));
      hi = std::max(hi, CodeBpw(kMaxBits, g, rows, cols, sf));
    }
    if (hi == 0) lo = hi = CodeBpw(int(d.bits), d.group_size, rows, cols, sf);  // no other group
    cheapest_bits += n * lo;
    ceiling_bits += n * hi;
  }
  TQ_CHECK(weights > 0, "plan", "no decoder linear to apply --budget-bpw to");
  cheapest_bits += fixed_bits;
  ceiling_bits += fixed_bits;
  b.cheapest_bpw = cheapest_bits / weights;
  b.ceiling_bpw = ceiling_bits / weights;
  if (cheapest_bits > x * weights + 1e-6)
    throw UsageError(flag, fmt::format("below the cheapest possible {:.3f} bits per linear weight",
                                       b.cheapest_bpw));
  const double bits = std::min(x * weights, ceiling_bits);
  b.linear_bytes_bound = int64_t(std::ceil(bits / 8.0)) + overhead;
  b.expert_bytes_bound = int64_t(double(b.linear_bytes_bound) * expert_weights / weights);
  return b;
}

}  // namespace tq
