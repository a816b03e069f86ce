#include "core/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/half.h"

namespace tq {

std::string ShapeToString(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

void ToF32(const TensorView& t, float* out) { ToF32(t, 0, t.numel(), out); }

void ToF32(const TensorView& t, int64_t begin, int64_t n, float* out) {
  switch (t.dtype) {
    case DType::F32: {
      const float* p = t.as<float>() + begin;
      std::copy(p, p + n, out);
      return;
    }
    case DType::F16:
      return F16ToF32(t.as<uint16_t>() + begin, out, size_t(n));
    case DType::BF16:
      return Bf16ToF32(t.as<uint16_t>() + begin, out, size_t(n));
    case DType::F64: {
      const double* p = t.as<double>() + begin;
      for (int64_t i = 0; i < n; ++i) out[i] = float(p[i]);
      return;
    }
    default:
      Fail("ToF32", "tensor of dtype {} is not a float tensor", DTypeName(t.dtype));
  }
}

}  // namespace tq
