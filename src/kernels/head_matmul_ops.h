// A per-head batched product, scalar reference (ref::) and fast CPU path (cpu::): multi-head
// latent attention's absorbed projections (model/mla_absorb.h), which turn each head's query
// into the latent space (q_lat[h] = W_UK[h]ᵀ q_nope[h]) and each head's latent output back
// into its value space (o[h] = W_UV[h] · o_lat[h]) around one plain attention over the latent
// cache.
#pragma once

#include <cstdint>

namespace tq::kernels {

// For token t < n and head h < heads:  y[t, h, 0..out) = W[h] · x[t, h, 0..in),
// W [heads, out, in] fp32 row-major; row (t, h) of x starts at x + (t·heads + h)·x_stride and of
// y at y + (t·heads + h)·y_stride (x_stride >= in, y_stride >= out: x may be the leading channels
// of wider rows, and y is written into the leading channels of its rows, the rest untouched).
// y must not overlap x.
struct HeadMatMulParams {
  int64_t heads = 0, in = 0, out = 0;
  int64_t x_stride = 0, y_stride = 0;
};

// Throws tq::Error("[head matmul] ...") on a bad shape.
void CheckHeadMatMul(const HeadMatMulParams& p);

namespace ref {
void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p, float* y);
}  // namespace ref

namespace cpu {
void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p, float* y);
}  // namespace cpu

}  // namespace tq::kernels
