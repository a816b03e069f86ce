// HeadMatMul on the cpu backend (head_matmul_ops.h).
//
// Few tokens (decode): one parallel pass over (head, chunk of output rows) tasks, each a dot
// product per (token, row) vectorised along `in`: the weights are read once per step, like
// the model's other decode products (MLA's absorbed matrices are heads · out · in fp32, about
// 4 MiB a layer for DeepSeek-V2-Lite). Many tokens (prefill): each head's rows are gathered
// into one contiguous [n, in] block and multiplied by the fp32 GEMM (cpu::MatMul), then
// scattered into y's strided rows.
#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec.h"
#include "kernels/head_matmul_ops.h"

namespace tq::kernels::cpu {
namespace {

constexpr int64_t kDotMaxTokens = 8;  // up to this many tokens take the dot-product pass
constexpr int64_t kRowsPerTask = 64;  // output rows a task (its weight rows stay in L2)
constexpr int64_t kMinParallelMacs = int64_t(1) << 18;  // below: the calling thread alone

// y[r] = dot(w[r, :], x) for r in [r0, r1); w rows `in` floats apart.
TQ_CPU_CLONES void DotRows(const float* x, const float* w, int64_t in, int64_t r0, int64_t r1,
                           float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* wr = w + r * in;
    V16 a0 = {}, a1 = {};
    int64_t k = 0;
    for (; k + 32 <= in; k += 32) {
      a0 += Load16(wr + k) * Load16(x + k);
      a1 += Load16(wr + k + 16) * Load16(x + k + 16);
    }
    for (; k + 16 <= in; k += 16) a0 += Load16(wr + k) * Load16(x + k);
    float s = HorizontalSum(a0 + a1);
    for (; k < in; ++k) s += wr[k] * x[k];
    y[r] = s;
  }
}

}  // namespace

void HeadMatMul(const float* x, int64_t n, const float* w, const HeadMatMulParams& p, float* y) {
  CheckHeadMatMul(p);
  const int64_t H = p.heads, in = p.in, out = p.out;
  if (n <= kDotMaxTokens) {
    const int64_t chunks = (out + kRowsPerTask - 1) / kRowsPerTask;
    auto task = [&](int64_t t, int) {
      const int64_t h = t / chunks, r0 = (t % chunks) * kRowsPerTask;
      const int64_t r1 = std::min(out, r0 + kRowsPerTask);
      for (int64_t i = 0; i < n; ++i)
        DotRows(x + (i * H + h) * p.x_stride, w + h * out * in, in, r0, r1,
                y + (i * H + h) * p.y_stride);
    };
    if (n * H * out * in < kMinParallelMacs) {
      for (int64_t t = 0; t < H * chunks; ++t) task(t, 0);
    } else {
      ThreadPool::Global().Run(H * chunks, task);
    }
    return;
  }
  thread_local AlignedBuffer<float> xs, ys;  // one head's [n, in] and [n, out], grown once
  if (xs.size() < size_t(n * in)) xs.resize(size_t(n * in));
  if (ys.size() < size_t(n * out)) ys.resize(size_t(n * out));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(xs.data() + i * in, x + (i * H + h) * p.x_stride, size_t(in) * sizeof(float));
    const TensorView wh{w + h * out * in, DType::F32, {out, in}};
    MatMul(xs.data(), n, wh, nullptr, ys.data());
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(y + (i * H + h) * p.y_stride, ys.data() + i * out, size_t(out) * sizeof(float));
  }
}

}  // namespace tq::kernels::cpu
