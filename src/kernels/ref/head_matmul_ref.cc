// HeadMatMul's scalar reference (head_matmul_ops.h): one dot product per output, summed in
// double.
#include "core/error.h"
#include "kernels/head_matmul_ops.h"

namespace tq::kernels {

void CheckHeadMatMul(const HeadMatMulParams& p) {
  TQ_CHECK(p.heads > 0 && p.in > 0 && p.out > 0 && p.x_stride >= p.in && p.y_stride >= p.out,
           "head matmul", "bad shape: {} heads, in {} (stride {}), out {} (stride {})", p.heads,
           p.in, p.x_stride, p.out, p.y_stride);
}

namespace ref {

void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p, float* y) {
  CheckHeadMatMul(p);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const float* xr = x + (t * p.heads + h) * p.x_stride;
      const float* wh = w + h * p.out * p.in;
      float* yr = y + (t * p.heads + h) * p.y_stride;
      for (int64_t o = 0; o < p.out; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < p.in; ++i) acc += double(wh[o * p.in + i]) * xr[i];
        yr[o] = float(acc);
      }
    }
  }
}

}  // namespace ref
}  // namespace tq::kernels
