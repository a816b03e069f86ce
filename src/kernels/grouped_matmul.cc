#include "kernels/grouped_matmul.h"

#include <algorithm>
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
    std::vector<uint8_t> done(items.size(), 0);
    std::vector<PackedMatMulOutput> outs;
    for (size_t i = 0; i < items.size(); ++i) {
      if (done[i]) continue;
      const GroupedMatMulItem& a = items[i];
      if (!a.packed || a.rows <= 0) {
        RunItem(be, a);
        continue;
      }
      outs.clear();
      for (size_t j = i; j < items.size(); ++j) {
        const GroupedMatMulItem& b = items[j];
        if (done[j] || !b.packed || b.x != a.x || b.rows != a.rows) continue;
        outs.push_back({b.packed, b.bias, b.y});
        done[j] = 1;
      }
      if (outs.size() == 1) {
        RunItem(be, a);
      } else {
        be.PackedMatMulGroup(a.x, a.rows, outs);
      }
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
