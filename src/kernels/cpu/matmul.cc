// Fast float matmul for the cpu backend: y[n, out] = x[n, in] · wᵀ + bias, w [out, in] in
// F32/F16/BF16 as stored (converted on the fly, never copied whole).
//
// Few rows (decode, small batches): a dot-product kernel vectorised along `in` that streams each
// weight row once per 4 tokens (memory bound, like the model it serves).
// Many rows (prefill): x is transposed once into blocks xt[k][TB tokens]; each task converts a few
// weight rows to fp32 (kMaxMr rows x kKc columns, L1-resident) and a register-blocked micro-kernel
// accumulates acc[MR rows][TB tokens] += w[r][k] * xt[k][:] — MR broadcasts and NV vector loads
// per k for MR*NV FMAs. Tasks are (row chunk, token block) pairs spread over the thread pool.
// With the amx level, 8+ rows against BF16 weights run on AMX tiles instead (amx_gemm.h), the
// weights copied per block into a tile-friendly stride and x carried as two bf16 (hi + lo) so the
// result keeps fp32-grade inputs.
#include <algorithm>
#include <cstring>
#include <functional>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/vec.h"

namespace tq::kernels::cpu {
namespace {

constexpr int64_t kDotMaxRows = 15;  // up to this many tokens use the dot-product kernel
// From this many tokens BF16 weights take AMX (amx level). bench_prefill_gemm BM_BatchGemm,
// [8192, 2048] bf16, 1 thread, CPU ms, dot kernel vs amx: 4 rows 8.3 vs 8.2, 8 rows 10.1 vs 4.5,
// 12 rows 10.4 vs 4.4, 16 rows (fp32 GEMM) 14.6 vs 6.7.
constexpr int64_t kAmxMinRows = 8;
constexpr int64_t kKc = 512;  // k block of the GEMM (xt block of kKc x TB floats in L2)
constexpr int kMaxMr = 6;
// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelMacs = int64_t(1) << 18;

// pool.Run, or a plain loop on this thread when the work is small.
void RunTasks(int64_t tasks, int64_t macs, const std::function<void(int64_t, int)>& fn) {
  if (macs < kMinParallelMacs) {
    for (int64_t t = 0; t < tasks; ++t) fn(t, 0);
  } else {
    ThreadPool::Global().Run(tasks, fn);
  }
}

// ---- dot-product kernel ---------------------------------------------------------------------

// sums[t] = dot(x[t, :], w) for t < NT; w is one weight row (fp32 or bf16).
template <int NT, bool kBf16>
TQ_INLINE void DotRow(const float* x, int64_t in, const void* wrow, float* sums) {
  const float* wf = static_cast<const float*>(wrow);
  const uint16_t* wb = static_cast<const uint16_t*>(wrow);
  V16 acc[NT][2] = {};
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    const V16 w0 = kBf16 ? LoadBf16x16(wb + k) : Load16(wf + k);
    const V16 w1 = kBf16 ? LoadBf16x16(wb + k + 16) : Load16(wf + k + 16);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t][0] += w0 * Load16(x + t * in + k);
      acc[t][1] += w1 * Load16(x + t * in + k + 16);
    }
  }
  for (; k + 16 <= in; k += 16) {
    const V16 w0 = kBf16 ? LoadBf16x16(wb + k) : Load16(wf + k);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t][0] += w0 * Load16(x + t * in + k);
  }
  for (int t = 0; t < NT; ++t) {
    float s = HorizontalSum(acc[t][0] + acc[t][1]);
    for (int64_t j = k; j < in; ++j) s += x[t * in + j] * (kBf16 ? Bf16ToF32(wb[j]) : wf[j]);
    sums[t] = s;
  }
}

template <bool kBf16>
TQ_INLINE void DotRowAnyN(const float* x, int64_t n, int64_t in, const void* wrow, float* sums) {
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) DotRow<4, kBf16>(x + t * in, in, wrow, sums + t);
  switch (n - t) {
    case 3:
      DotRow<3, kBf16>(x + t * in, in, wrow, sums + t);
      break;
    case 2:
      DotRow<2, kBf16>(x + t * in, in, wrow, sums + t);
      break;
    case 1:
      DotRow<1, kBf16>(x + t * in, in, wrow, sums + t);
      break;
  }
}

// Rows [o0, o1) of y for all n tokens. rowbuf: `in` floats (fp16 rows are converted into it).
TQ_CPU_CLONES void DotRows(const float* x, int64_t n, int64_t in, const TensorView& w,
                           const float* bias, int64_t o0, int64_t o1, float* y, float* rowbuf) {
  const int64_t out = w.dim(0);
  float sums[kDotMaxRows];
  for (int64_t o = o0; o < o1; ++o) {
    if (w.dtype == DType::BF16) {
      DotRowAnyN<true>(x, n, in, w.as<uint16_t>() + o * in, sums);
    } else if (w.dtype == DType::F32) {
      DotRowAnyN<false>(x, n, in, w.as<float>() + o * in, sums);
    } else {
      F16ToF32(w.as<uint16_t>() + o * in, rowbuf, size_t(in));
      DotRowAnyN<false>(x, n, in, rowbuf, sums);
    }
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t t = 0; t < n; ++t) y[t * out + o] = sums[t] + b;
  }
}

// ---- GEMM -----------------------------------------------------------------------------------

// xt[k * tb + lane] = x[(t0 + lane) * in + k] for lane < rows, 0 beyond (a zero-padded block).
TQ_CPU_CLONES void PackTransposed(const float* x, int64_t t0, int64_t rows, int64_t in, int64_t tb,
                                  float* xt) {
  constexpr int64_t kStep = 16;
  for (int64_t k0 = 0; k0 < in; k0 += kStep) {
    const int64_t k1 = std::min(in, k0 + kStep);
    for (int64_t lane = 0; lane < tb; ++lane) {
      if (lane < rows) {
        const float* src = x + (t0 + lane) * in;
        for (int64_t k = k0; k < k1; ++k) xt[k * tb + lane] = src[k];
      } else {
        for (int64_t k = k0; k < k1; ++k) xt[k * tb + lane] = 0.0f;
      }
    }
  }
}

// acc[MR][NV] over k < kc (VT: the vector type, V16 or V8; NV vectors = one block of
// NV · lanes tokens); w rows at stride ldw; then y (+)= acc for the `valid` tokens.
template <typename VT, int MR, int NV>
TQ_INLINE void MicroKernel(const float* xt, const float* w, int64_t ldw, int64_t kc, bool first,
                           const float* bias, float* y, int64_t ldy, int64_t valid) {
  constexpr int kLanes = int(sizeof(VT) / sizeof(float));
  VT acc[MR][NV] = {};
  for (int64_t k = 0; k < kc; ++k) {
    VT xv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      std::memcpy(&xv[v], xt + k * (NV * kLanes) + v * kLanes, sizeof(VT));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const float s = w[r * ldw + k];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] += s * xv[v];
    }
  }
  for (int r = 0; r < MR; ++r) {
    const float b = (first && bias) ? bias[r] : 0.0f;
    for (int v = 0; v < NV; ++v) {
      for (int lane = 0; lane < kLanes; ++lane) {
        const int64_t t = v * kLanes + lane;
        if (t >= valid) break;
        float& dst = y[t * ldy + r];
        dst = (first ? b : dst) + acc[r][v][lane];
      }
    }
  }
}

// kRegs: the ISA's vector registers (24 of 32 zmm for accumulators with V16; 12 of 16 ymm with V8).
template <typename VT, int NV, int kRegs>
TQ_INLINE void MicroKernelRows(int rows, const float* xt, const float* w, int64_t ldw, int64_t kc,
                               bool first, const float* bias, float* y, int64_t ldy,
                               int64_t valid) {
  switch (rows) {
#define TQ_MK_CASE(R)                                                            \
  case R:                                                                        \
    if constexpr (R * NV <= kRegs)                                               \
      return MicroKernel<VT, R, NV>(xt, w, ldw, kc, first, bias, y, ldy, valid); \
    break;
    TQ_MK_CASE(1)
    TQ_MK_CASE(2)
    TQ_MK_CASE(3)
    TQ_MK_CASE(4)
    TQ_MK_CASE(5)
    TQ_MK_CASE(6)
#undef TQ_MK_CASE
  }
  Fail("matmul cpu", "no micro-kernel for {} rows x {} vectors", rows, NV);
}

// One task: weight rows [o0, o1) against one token block (xt: [in][NV*16], `valid` tokens
// starting at row t0 of y). wbuf: kMaxMr * kKc floats. VT: V16 (the clones of GemmTask) or V8
// (GemmTaskAvx2: GCC lowers V16 arithmetic to pairs of ymm on AVX2 and kept MicroKernel's
// accumulators on the stack, every FMA reading and writing them — perf on an AVX2-only EPYC: 94%
// of a prompt in GemmTask, 100 tok/s prefill on the 21M model, below its decode speed).
template <typename VT, int kRegs>
TQ_INLINE void GemmTaskBody(int nv, int mr, const float* xt, int64_t t0, int64_t valid, int64_t in,
                            const TensorView& w, const float* bias, int64_t o0, int64_t o1,
                            float* y, float* wbuf) {
  constexpr int kPer16 = int(64 / sizeof(VT));  // VT vectors per 16 tokens
  const int64_t out = w.dim(0), tb = nv * 16;
  for (int64_t k0 = 0; k0 < in; k0 += kKc) {
    const int64_t kc = std::min(kKc, in - k0);
    for (int64_t og = o0; og < o1; og += mr) {
      const int rows = int(std::min<int64_t>(mr, o1 - og));
      const float* wrows;
      int64_t ldw;
      if (w.dtype == DType::F32) {
        wrows = w.as<float>() + og * in + k0;
        ldw = in;
      } else {
        for (int r = 0; r < rows; ++r) {
          const uint16_t* src = w.as<uint16_t>() + (og + r) * in + k0;
          float* dst = wbuf + r * kc;
          if (w.dtype == DType::BF16) {
            for (int64_t k = 0; k < kc; ++k) {
              const uint32_t u = uint32_t(src[k]) << 16;
              std::memcpy(dst + k, &u, 4);
            }
          } else {
            F16ToF32(src, dst, size_t(kc));
          }
        }
        wrows = wbuf;
        ldw = kc;
      }
      float* ytile = y + t0 * out + og;
      const float* xk = xt + k0 * tb;
      const float* b = bias ? bias + og : nullptr;
      if (nv == 4) {
        MicroKernelRows<VT, 4 * kPer16, kRegs>(rows, xk, wrows, ldw, kc, k0 == 0, b, ytile, out,
                                               valid);
      } else if (nv == 2) {
        MicroKernelRows<VT, 2 * kPer16, kRegs>(rows, xk, wrows, ldw, kc, k0 == 0, b, ytile, out,
                                               valid);
      } else {
        MicroKernelRows<VT, kPer16, kRegs>(rows, xk, wrows, ldw, kc, k0 == 0, b, ytile, out, valid);
      }
    }
  }
}

TQ_CPU_CLONES void GemmTask(int nv, int mr, const float* xt, int64_t t0, int64_t valid, int64_t in,
                            const TensorView& w, const float* bias, int64_t o0, int64_t o1,
                            float* y, float* wbuf) {
  GemmTaskBody<V16, 24>(nv, mr, xt, t0, valid, in, w, bias, o0, o1, y, wbuf);
}

#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v3"))) void GemmTaskAvx2(int nv, int mr, const float* xt,
                                                            int64_t t0, int64_t valid, int64_t in,
                                                            const TensorView& w, const float* bias,
                                                            int64_t o0, int64_t o1, float* y,
                                                            float* wbuf) {
  GemmTaskBody<V8, 12>(nv, mr, xt, t0, valid, in, w, bias, o0, o1, y, wbuf);
}
#endif

struct GemmShape {
  int nv, mr;  // tokens per block = nv * 16; weight rows per micro-kernel
};
// Token blocks no wider than the batch (a 16-token batch does not pay for 64 lanes).
GemmShape ChooseGemmShape(int64_t n, bool avx2) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512 && !avx2) {  // up to 24 zmm accumulators
    if (n <= 16) return {1, 6};
    if (n <= 32) return {2, 6};
    return {4, 6};
  }
#endif
  if (n <= 16) return {1, 6};
  return {2, 3};  // 6 x 2 ymm pairs: fits 16 ymm registers
}

}  // namespace

void MatMulGroup(const float* x, int64_t n, std::span<const MatMulOutput> outs) {
  constexpr size_t kMaxGroup = 16;
  TQ_CHECK(!outs.empty() && outs.size() <= kMaxGroup, "matmul cpu", "{} matmuls in one group",
           outs.size());
  const int64_t in = outs[0].w->rank() == 2 ? outs[0].w->dim(1) : -1;
  int64_t total_out = 0;
  for (const MatMulOutput& o : outs) {
    const TensorView& w = *o.w;
    TQ_CHECK(w.rank() == 2 && w.dim(1) == in &&
                 (w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16),
             "matmul cpu", "weight must be a 2-D F32/F16/BF16 tensor with {} columns, got {} {}",
             in, DTypeName(w.dtype), ShapeToString(w.shape));
    total_out += w.dim(0);
  }
  const int64_t macs = n * total_out * in;
  const int groups = int(outs.size());
  // first_task[j]: the first task of matmul j (tasks of all matmuls form one parallel pass).
  int64_t first_task[kMaxGroup + 1];
  auto job_of = [&](int64_t task) {
    int j = 0;
    while (task >= first_task[j + 1]) ++j;
    return j;
  };
  bool amx_ok = n >= kAmxMinRows && amx::Active() && in % amx::kKMultiple == 0;
  for (const MatMulOutput& o : outs) amx_ok = amx_ok && o.w->dtype == DType::BF16;
  if (amx_ok) {
    const amx::Activations a = amx::PrepareActivations(x, n, in, /*split=*/true);
    for (const MatMulOutput& o : outs) {
      const uint16_t* wb = o.w->as<uint16_t>();
      amx::Gemm(
          a, o.w->dim(0),
          [&](int64_t r0, int64_t count, int64_t k0, int64_t kc, uint16_t* buf, int64_t ld) {
            for (int64_t r = 0; r < count; ++r)
              std::memcpy(buf + r * ld, wb + (r0 + r) * in + k0, size_t(kc) * 2);
          },
          o.bias, o.y);
    }
    return;
  }
  ThreadPool& pool = ThreadPool::Global();
  if (n <= kDotMaxRows) {
    // About 4 chunks per thread for balance; each chunk at least 16 rows.
    const int64_t chunk = std::max<int64_t>(16, total_out / (4 * pool.size()) + 1);
    first_task[0] = 0;
    for (int j = 0; j < groups; ++j)
      first_task[j + 1] = first_task[j] + (outs[size_t(j)].w->dim(0) + chunk - 1) / chunk;
    RunTasks(first_task[groups], macs, [&](int64_t task, int) {
      const int j = job_of(task);
      const MatMulOutput& o = outs[size_t(j)];
      thread_local AlignedBuffer<float> rowbuf;
      if (o.w->dtype == DType::F16 && rowbuf.size() < size_t(in)) rowbuf.resize(size_t(in));
      const int64_t o0 = (task - first_task[j]) * chunk;
      DotRows(x, n, in, *o.w, o.bias, o0, std::min(o.w->dim(0), o0 + chunk), o.y, rowbuf.data());
    });
    return;
  }
  // The AVX2 level (an AVX2-only CPU, or TURBOQUANT_ISA=avx2) takes the 8-wide kernel.
  const bool avx2 = ActiveIsa() == Isa::kAvx2;
  const GemmShape shape = ChooseGemmShape(n, avx2);
  const int64_t tb = shape.nv * 16;
  const int64_t blocks = (n + tb - 1) / tb;
  // x is transposed once for the whole group.
  thread_local AlignedBuffer<float> xt_all;
  if (xt_all.size() < size_t(blocks * tb * in)) xt_all.resize(size_t(blocks * tb * in));
  float* xt = xt_all.data();
  RunTasks(blocks, macs, [&](int64_t b, int) {
    PackTransposed(x, b * tb, std::min(tb, n - b * tb), in, tb, xt + b * tb * in);
  });
  const int64_t rows_per_task = shape.mr * 8;
  first_task[0] = 0;
  for (int j = 0; j < groups; ++j) {
    const int64_t row_tasks = (outs[size_t(j)].w->dim(0) + rows_per_task - 1) / rows_per_task;
    first_task[j + 1] = first_task[j] + row_tasks * blocks;
  }
  RunTasks(first_task[groups], macs, [&](int64_t task, int) {
    const int j = job_of(task);
    const MatMulOutput& o = outs[size_t(j)];
    thread_local AlignedBuffer<float> wbuf;
    if (wbuf.size() < size_t(kMaxMr * kKc)) wbuf.resize(size_t(kMaxMr * kKc));
    const int64_t local = task - first_task[j];
    const int64_t b = local % blocks, rt = local / blocks;
    const int64_t o0 = rt * rows_per_task, o1 = std::min(o.w->dim(0), o0 + rows_per_task);
#if defined(__x86_64__)
    if (avx2) {
      GemmTaskAvx2(shape.nv, shape.mr, xt + b * tb * in, b * tb, std::min(tb, n - b * tb), in, *o.w,
                   o.bias, o0, o1, o.y, wbuf.data());
      return;
    }
#endif
    GemmTask(shape.nv, shape.mr, xt + b * tb * in, b * tb, std::min(tb, n - b * tb), in, *o.w,
             o.bias, o0, o1, o.y, wbuf.data());
  });
}

void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias, float* y) {
  const MatMulOutput o{&w, bias, y};
  MatMulGroup(x, n, {&o, 1});
}

}  // namespace tq::kernels::cpu
