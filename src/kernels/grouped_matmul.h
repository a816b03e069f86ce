// Independent matmuls as one op (a MoE layer's resident experts, each over the rows routed to
// it: model/moe_forward.cc). Each item is the call the one-by-one path makes for it:
//   packed:  PackedMatMul(x, rows, *packed, bias, y)   (x already rotated)
//   else:    dense.size() == 1: MatMul(x, rows, *dense[0].w, dense[0].bias, dense[0].y);
//            more: MatMulGroup(x, rows, dense)
// so each item's y is bit for bit what its own call gives. On a host backend the items run side
// by side on the thread pool (an item's kernels then run on its thread alone; largest items
// first), when there are at least two per thread; otherwise one after another. On a device,
// packed items over the same x and rows go to one PackedMatMulGroup (the backend's grouped
// launches; a member's y as its own call computes it, within the group kernel's bounds), the rest
// one after another. A free function over the Backend interface, not a virtual
// (backend.h stays as it is): a device backend with a grouped kernel would make it one.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/backend.h"

namespace tq::kernels {

struct GroupedMatMulItem {
  const float* x = nullptr;  // [rows, in]
  int64_t rows = 0;
  const PackedMatrix* packed = nullptr;
  const float* bias = nullptr;  // packed: [out] or null
  float* y = nullptr;           // packed: [rows, out]
  std::span<const MatMulOutput> dense;
};

// The items must not write what another one reads.
void GroupedMatMul(Backend& be, std::span<const GroupedMatMulItem> items);

}  // namespace tq::kernels
