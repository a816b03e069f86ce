#include "kernels/grouped_matmul.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace tq::kernels {
namespace {

void RunItem(Backend& be, const GroupedMatMulItem& it) {
  if (it.rows <= 0) return;
  if (it.packed) return be.PackedMatMul(it.x, it.rows, *it.packed, it.bias, it.y);
  TQ_CHECK(!it.dense.empty(), be.name(), "grouped matmul: an item with no weight");
  if (it.dense.size() == 1)
    return be.MatMul(it.x, it.rows, *it.dense[0].w, it.dense[0].bias, it.dense[0].y);
  be.MatMulGroup(it.x, it.rows, it.dense);
}

// Multiply-adds of an item (its place in the order).
int64_t Work(const GroupedMatMulItem& it) {
  if (it.packed) return it.rows * it.packed->rows * it.packed->cols;
  int64_t w = 0;
  for (const MatMulOutput& o : it.dense) w += it.rows * o.w->numel();
  return w;
}

}  // namespace

void GroupedMatMul(Backend& be, std::span<const GroupedMatMulItem> items) {
  ThreadPool& pool = ThreadPool::Global();
  if (be.memory_space() != MemorySpace::kHost) {
    // A device: packed items over the same input (a MoE layer's gate / up products of one token)
    // as one PackedMatMulGroup each (a few launches instead of one a matrix); the rest in turn.
    // Items sorted by (x, rows) so that each such run is found in one pass.
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto key = [&](size_t i) {
      const GroupedMatMulItem& it = items[i];
      const bool shareable = it.packed && it.rows > 0;
      return std::make_tuple(!shareable, shareable ? reinterpret_cast<uintptr_t>(it.x) : 0, it.rows,
                             i);
    };
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
    std::vector<PackedMatMulOutput> outs;
    for (size_t k = 0; k < order.size();) {
      const GroupedMatMulItem& a = items[order[k]];
      size_t end = k + 1;
      if (a.packed && a.rows > 0)
        while (end < order.size() && items[order[end]].packed && items[order[end]].x == a.x &&
               items[order[end]].rows == a.rows)
          ++end;
      if (end - k == 1) {
        RunItem(be, a);
      } else {
        outs.clear();
        for (size_t j = k; j < end; ++j) {
          const GroupedMatMulItem& b = items[order[j]];
          outs.push_back({b.packed, b.bias, b.y});
        }
        be.PackedMatMulGroup(a.x, a.rows, outs);
      }
      k = end;
    }
    return;
  }
  if (pool.size() < 2 || items.size() < 2 * size_t(pool.size())) {
    for (const GroupedMatMulItem& it : items) RunItem(be, it);
    return;
  }
  std::vector<std::pair<int64_t, size_t>> order;  // (-work, item): largest first
  order.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) order.emplace_back(-Work(items[i]), i);
  std::sort(order.begin(), order.end());
  pool.Run(int64_t(order.size()),
           [&](int64_t t, int) { RunItem(be, items[order[size_t(t)].second]); });
}

}  // namespace tq::kernels
