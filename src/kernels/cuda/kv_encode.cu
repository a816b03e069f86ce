// The TurboQuant KV cache's append on the device (Backend::KvEncode, CenterRows, GatherColumns):
// the same arithmetic as the host codec (kernels/kv_encode.cc), so that a cache coded on the GPU
// holds the host's codes. Per-group sums are in double as on the host, but reduced across a warp
// (another order: the last bits of a sum may differ, which can change a code or a scale only at a
// near-tie). Products the host rounds separately (x - σ·level, e², S·r) use explicit _rn
// intrinsics so that nvcc does not contract them into fused multiply-adds.
#include <cfloat>
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace tq::kernels::cuda {
namespace {

constexpr int kEncodeWarps = 4;      // vectors per CUDA block (one warp each)
constexpr int kEncodeMaxDim = 1024;  // the codec's largest head_dim
constexpr int kCenterThreads = 256;  // elementwise kernels

__device__ __forceinline__ uint16_t F16Bits(float f) {
#if defined(TQ_CUDA_EMU)
  return tq::F32ToF16(f);
#else
  return __half_as_ushort(__float2half_rn(f));
#endif
}

__device__ __forceinline__ bool Finite(float v) { return fabsf(v) <= FLT_MAX; }

__device__ __forceinline__ double WarpSumD(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A segment's levels and thresholds in shared memory (KvEncodeKernel loads both segments' once a
// block: the global tables cost one dependent L1 round trip per comparison).
struct SharedBook {
  float level[2][256];
  float thr[2][256];
};

// #{t < v} over segment sg's thresholds (the nearest level; NaN codes to 0): the first t[i] >= v
// (or not < v) by binary search, which counts the same as the scalar codec's linear count.
__device__ __forceinline__ int NearestCode(const DevSegment& g, const float* t, float v) {
  int lo = 0, hi = g.levels - 1;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (t[mid] < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

__device__ __forceinline__ int SegmentIndex(const DevCodeFormat& f, int64_t i) {
  return f.num_segments > 1 && i >= f.seg[0].end ? 1 : 0;
}

// Codes of the group's channels [c0, c0 + group) at scale s into codes[c0 ..]; every lane gets
// Σ (x - s·level)² (double).
__device__ double Assign(const DevCodeFormat& f, const SharedBook& book, const float* x, int64_t c0,
                         float s, uint8_t* codes, int lane) {
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  double err = 0;
  for (int64_t i = c0 + lane; i < c0 + f.group; i += 32) {
    const int sg = SegmentIndex(f, i);
    const int c = NearestCode(f.seg[sg], book.thr[sg], __fmul_rn(x[i], inv));
    codes[i] = uint8_t(c);
    const double e = double(x[i]) - double(s) * double(book.level[sg][c]);  // exact product
    err += __dmul_rn(e, e);
  }
  return WarpSumD(err);
}

// One warp per vector t = (position i, kv head h), t < n · heads: EncodeKvVector's steps. Job
// blockIdx.y of {j0, j1} (an append's keys and values in one launch; a single encode passes one
// job and grid.y = 1).
__global__ void KvEncodeKernel(DevKvEncodeJob j0, DevKvEncodeJob j1, bool src_f16, int64_t n,
                               int64_t heads, int64_t pos_stride, int64_t head_stride,
                               int64_t slot0) {
  const DevKvEncodeJob& job = blockIdx.y == 0 ? j0 : j1;
  const DevKvEncode& p = job.p;
  const void* src = job.src;
  const DevCodeSlots& dst = job.dst;
  __shared__ float xs[kEncodeWarps][kEncodeMaxDim];
  __shared__ uint8_t idxs[kEncodeWarps][kEncodeMaxDim], trials[kEncodeWarps][kEncodeMaxDim];
  __shared__ SharedBook book;
  const DevCodeFormat& f = p.f;
  for (int sg = 0; sg < f.num_segments; ++sg)
    for (int c = int(threadIdx.x); c < f.seg[sg].levels; c += int(blockDim.x)) {
      book.level[sg][c] = __ldg(f.seg[sg].table + c);
      if (c + 1 < f.seg[sg].levels) book.thr[sg][c] = __ldg(f.seg[sg].thresholds + c);
    }
  __syncthreads();
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int64_t t = int64_t(blockIdx.x) * kEncodeWarps + warp;
  if (t >= n * heads) return;  // the whole warp
  const int64_t i = t / heads, h = t - i * heads, d = f.dim, g = f.group;
  float* x = xs[warp];
  uint8_t* idx = idxs[warp];
  uint8_t* trial = trials[warp];
  const int64_t at = i * pos_stride + h * head_stride;
  for (int64_t j = lane; j < d; j += 32)
    x[j] = src_f16 ? F16(static_cast<const uint16_t*>(src)[at + j])
                   : static_cast<const float*>(src)[at + j];
  __syncwarp();
  const int64_t slot = h * dst.head_stride + slot0 + i;
  uint16_t* scales = dst.scales + slot * (d / g);
  for (int64_t c0 = 0; c0 < d; c0 += g) {
    double ss = 0;
    for (int64_t j = c0 + lane; j < c0 + g; j += 32) ss += double(x[j]) * double(x[j]);
    ss = WarpSumD(ss);
    uint16_t best = F16Bits(float(sqrt(ss / double(g))));
    if (!Finite(F16(best))) best = F16Bits(65504.0f);
    double best_err = Assign(f, book, x, c0, F16(best), idx, lane);
    if (p.scale != 0) {  // mse / unbiased: three rounds of σ = ⟨x, c⟩ / ⟨c, c⟩
      uint16_t s = best;
      for (int round = 0; round < 3; ++round) {
        Assign(f, book, x, c0, F16(s), trial, lane);
        __syncwarp();
        double xc = 0, cc = 0;
        for (int64_t j = c0 + lane; j < c0 + g; j += 32) {
          const double c = book.level[SegmentIndex(f, j)][trial[j]];
          xc += double(x[j]) * c;
          cc += c * c;
        }
        xc = WarpSumD(xc);
        cc = WarpSumD(cc);
        if (cc <= 0 || xc <= 0) break;
        const uint16_t next = F16Bits(float(xc / cc));
        if (next == s || !Finite(F16(next))) break;
        s = next;
        const double err = Assign(f, book, x, c0, F16(s), trial, lane);
        if (err < best_err) {
          best_err = err;
          best = s;
          for (int64_t j = c0 + lane; j < c0 + g; j += 32) idx[j] = trial[j];
        }
      }
    }
    __syncwarp();
    if (p.scale == 2) {  // unbiased: keep the codes, σ = ‖x‖² / ⟨x, c⟩
      double xc = 0;
      for (int64_t j = c0 + lane; j < c0 + g; j += 32)
        xc += double(x[j]) * double(book.level[SegmentIndex(f, j)][idx[j]]);
      xc = WarpSumD(xc);
      const uint16_t s = F16Bits(float(ss / xc));
      if (xc > 0 && Finite(F16(s))) best = s;
    }
    if (lane == 0) scales[c0 / g] = best;
  }
  __syncwarp();
  // Pack each segment's codes (32-code units, the last one zero-padded).
  uint8_t* codes = dst.codes + slot * f.code_bytes;
  for (int sgi = 0; sgi < f.num_segments; ++sgi) {
    const DevSegment& sg = f.seg[sgi];
    const int ub = UnitBytes(sg.format);
    const int64_t len = sg.end - sg.begin, bytes = (len + 31) / 32 * ub;
    for (int64_t b = lane; b < bytes; b += 32) {
      const int64_t u = b / ub;
      const int avail = int(len - 32 * u < 32 ? len - 32 * u : 32);
      codes[sg.byte_offset + b] =
          uint8_t(PackedUnitByte(sg.format, idx + sg.begin + 32 * u, avail, int(b - u * ub)));
    }
  }
  if (!p.qjl_matrix) return;
  // The residual r = x - σ·level (in place of x), then bits = sign(S r) and ‖r‖.
  for (int64_t j = lane; j < d; j += 32) {
    const float back = __fmul_rn(F16(scales[j / g]), book.level[SegmentIndex(f, j)][idx[j]]);
    x[j] = __fsub_rn(x[j], back);
  }
  __syncwarp();
  double rr = 0;
  for (int64_t j = lane; j < d; j += 32) rr += double(x[j]) * double(x[j]);
  rr = WarpSumD(rr);
  const int64_t m = p.qjl_m, sign_bytes = (m + 7) / 8;
  uint8_t* bits = dst.qjl_bits + slot * sign_bytes;
  for (int64_t b = lane; b < sign_bytes; b += 32) {
    int byte = 0;
    for (int k = 0; k < 8 && 8 * b + k < m; ++k) {
      const float* row = p.qjl_matrix + (8 * b + k) * d;
      float acc = 0;  // in channel order, no fused multiply-add: QjlProject's sum
      for (int64_t j = 0; j < d; ++j) acc = __fadd_rn(acc, __fmul_rn(__ldg(row + j), x[j]));
      if (acc >= 0) byte |= 1 << k;
    }
    bits[b] = uint8_t(byte);
  }
  if (lane == 0) {
    uint16_t norm = F16Bits(float(sqrt(rr)));
    if (!Finite(F16(norm))) norm = F16Bits(65504.0f);
    dst.qjl_norm[slot] = norm;
  }
}

// One thread per column j < width: mean[j] = Σ_t x[t, j] / rows, summed in row order (fp32).
__global__ void ColumnMeanKernel(const float* x, int64_t rows, int64_t width, float* mean) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= width) return;
  float acc = 0.0f;
  for (int64_t t = 0; t < rows; ++t) acc = __fadd_rn(acc, x[t * width + j]);
  mean[j] = __fdiv_rn(acc, float(rows));
}

// One thread per element of x [rows, width]: x -= mean (per column).
__global__ void SubtractMeanKernel(float* x, int64_t rows, int64_t width, const float* mean) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * width) return;
  x[e] = __fsub_rn(x[e], mean[e % width]);
}

// One thread per element of out [rows, dim].
__global__ void GatherColumnsKernel(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                                    int64_t period, float* out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * dim) return;
  const int64_t r = e / dim, j = e - r * dim;
  out[e] = x[r * dim + order[(r % period) * dim + j]];
}

}  // namespace

void LaunchKvEncode(const DevKvEncode& p, const void* src, bool src_f16, int64_t n, int64_t heads,
                    int64_t pos_stride, int64_t head_stride, const DevCodeSlots& dst, int64_t slot0,
                    cudaStream_t s) {
  const int64_t vectors = n * heads;
  if (vectors <= 0) return;
  const DevKvEncodeJob job{p, src, dst};
  TQ_LAUNCH(KvEncodeKernel, Blocks(vectors, kEncodeWarps), kEncodeWarps * 32, s, job, job, src_f16,
            n, heads, pos_stride, head_stride, slot0);
}

void LaunchKvEncodePair(const DevKvEncodeJob& k, const DevKvEncodeJob& v, bool src_f16, int64_t n,
                        int64_t heads, int64_t pos_stride, int64_t head_stride, int64_t slot0,
                        cudaStream_t s) {
  const int64_t vectors = n * heads;
  if (vectors <= 0) return;
  const dim3 grid(Blocks(vectors, kEncodeWarps), 2);
  TQ_LAUNCH(KvEncodeKernel, grid, kEncodeWarps * 32, s, k, v, src_f16, n, heads, pos_stride,
            head_stride, slot0);
}

void LaunchCenterRows(float* x, int64_t rows, int64_t width, float* mean, int64_t mean_rows,
                      cudaStream_t s) {
  if (mean_rows > 0)
    TQ_LAUNCH(ColumnMeanKernel, Blocks(width, 128), 128, s, x, mean_rows, width, mean);
  if (rows > 0)
    TQ_LAUNCH(SubtractMeanKernel, Blocks(rows * width, kCenterThreads), kCenterThreads, s, x, rows,
              width, mean);
}

void LaunchGatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                         int64_t period, float* out, cudaStream_t s) {
  if (rows > 0)
    TQ_LAUNCH(GatherColumnsKernel, Blocks(rows * dim, kCenterThreads), kCenterThreads, s, x, rows,
              dim, order, period, out);
}

}  // namespace tq::kernels::cuda
