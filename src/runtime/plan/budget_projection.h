// `plan --budget-bpw X`: what `convert --budget-bpw X` can produce, from headers only. The budget
// allocator (convert/budget.h) re-chooses the format and group of every quantized decoder linear
// from each tensor's measured error, which needs the weights; but it guarantees that codes + group
// scales (+ e8 scale tables) of all decoder linears (kept or ternary ones at their own cost)
// average at most X bits per weight. plan projects that guarantee: an upper bound.
#pragma once

#include <cstdint>

#include "model/quant_recipe.h"

namespace tq {

struct BudgetBound {
  int64_t linear_bytes_before = 0;  // decoder linears as the recipe alone projects them
  int64_t linear_bytes_bound = 0;   // at most this after the budget (codes, scales, codebooks,
                                    // sign vectors)
  int64_t expert_bytes_bound = 0;   // of which expert projections (in proportion to weights)
  double cheapest_bpw = 0;          // the least the allocator can reach (every linear at 2 bits)
  double ceiling_bpw = 0;           // the most it can spend (8 bits, group 32)
};

// Throws tq::UsageError("--budget-bpw X", ...) like convert: X below 1.6 or below the cheapest
// reachable average, or a recipe that is not the turboquant codebook method.
BudgetBound BoundBitBudget(const QuantRecipe& recipe, double budget_bpw);

}  // namespace tq
