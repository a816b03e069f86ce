#include "model/transpose_copy.h"

#include <algorithm>
#include <cstring>

namespace tq {
namespace {

template <typename T>
void Tiled(const T* src, int64_t stride, int64_t step, int64_t offset, int64_t rows, int64_t cols,
           T* dst) {
  constexpr int64_t kTile = 64;
  for (int64_t i0 = 0; i0 < cols; i0 += kTile) {
    const int64_t i1 = std::min(cols, i0 + kTile);
    for (int64_t o0 = 0; o0 < rows; o0 += kTile) {
      const int64_t o1 = std::min(rows, o0 + kTile);
      for (int64_t o = o0; o < o1; ++o) {
        const T* s = src + o * step + offset;
        T* d = dst + o * cols;
        for (int64_t i = i0; i < i1; ++i) d[i] = s[i * stride];
      }
    }
  }
}

}  // namespace

void TransposeCopy(const uint8_t* src, int64_t stride, int64_t step, int64_t offset, int64_t rows,
                   int64_t cols, size_t es, uint8_t* dst) {
  if (es == 2) {
    Tiled(reinterpret_cast<const uint16_t*>(src), stride, step, offset, rows, cols,
          reinterpret_cast<uint16_t*>(dst));
    return;
  }
  if (es == 4) {
    Tiled(reinterpret_cast<const uint32_t*>(src), stride, step, offset, rows, cols,
          reinterpret_cast<uint32_t*>(dst));
    return;
  }
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t i = 0; i < cols; ++i)
      std::memcpy(dst + size_t(o * cols + i) * es,
                  src + size_t(i * stride + o * step + offset) * es, es);
}

}  // namespace tq
