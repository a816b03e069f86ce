// Non-owning tensor views: a pointer, a dtype and a shape (row-major, last dim contiguous).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tq {

using Shape = std::vector<int64_t>;

inline int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string ShapeToString(const Shape& s);  // "[2, 3]"

struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;

  int64_t numel() const { return NumElements(shape); }
  size_t nbytes() const { return size_t(numel()) * DTypeSize(dtype); }
  int rank() const { return int(shape.size()); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
};

// Converts any float tensor (F32/F16/BF16/F64) to fp32 into `out` (numel elements).
void ToF32(const TensorView& t, float* out);
// Same for a contiguous range of elements [begin, begin + n).
void ToF32(const TensorView& t, int64_t begin, int64_t n, float* out);

}  // namespace tq
