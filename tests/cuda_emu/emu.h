// A CUDA emulator for the host, just large enough to run kernels/cuda/ unchanged in the unit tests
// of a machine without a GPU (tests/cuda_emu/cuda_emu_backend.cc includes the .cu sources after
// this header). Every CUDA thread of a block is a ucontext fiber on the calling OS thread; blocks
// run one after another, so `__shared__` is a static variable. __syncthreads() and the warp
// shuffles are barriers between fibers (of the block, of the warp), released once every fiber
// that has not returned has arrived; a block that cannot progress aborts the test with a message.
// The runtime API part (cudaMalloc, cudaMemcpy, ...) is host memory with the checks a real
// device would make where they matter to the backend: overlapping cudaMemcpy is refused (the
// backend must use its scratch buffer), allocations beyond kEmuMemory fail, empty grids are
// launch errors.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "core/half.h"

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

using std::max;
using std::min;

namespace tq::emu {

inline dim3 g_thread, g_block, g_block_dim, g_grid_dim;

enum class FiberState { kRunnable, kBlockBarrier, kWarpBarrier, kDone };
struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  FiberState state = FiberState::kRunnable;
  dim3 tid;
};

struct Scheduler {
  ucontext_t main;
  std::vector<Fiber> fibers;
  int current = -1;
  const std::function<void()>* body = nullptr;
  float shfl_f[64][32];
  double shfl_d[64][32];
  int shfl_i[64][32];
  unsigned mma_parity[64][32];  // WarpMma3xTf32's buffer choice, per fiber; zeroed per block
};
inline Scheduler g_sched;

inline void Trampoline() {
  (*g_sched.body)();
  g_sched.fibers[size_t(g_sched.current)].state = FiberState::kDone;
  swapcontext(&g_sched.fibers[size_t(g_sched.current)].ctx, &g_sched.main);
}

inline void Wait(FiberState s) {
  Fiber& f = g_sched.fibers[size_t(g_sched.current)];
  f.state = s;
  swapcontext(&f.ctx, &g_sched.main);
}

// Runs `body` as every thread of every block of `grid` x `block`.
inline bool Launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  const unsigned n = block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || n == 0 || n > 1024) return false;
  Scheduler& s = g_sched;
  s.body = &body;
  g_grid_dim = grid;
  g_block_dim = block;
  s.fibers.resize(n);
  for (Fiber& f : s.fibers)
    if (f.stack.empty()) f.stack.resize(256 * 1024);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        g_block = dim3(bx, by, bz);
        std::memset(s.mma_parity, 0, sizeof(s.mma_parity));
        for (unsigned t = 0; t < n; ++t) {
          Fiber& f = s.fibers[t];
          f.state = FiberState::kRunnable;
          f.tid = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, Trampoline, 0);
        }
        for (;;) {
          bool ran = false;
          for (unsigned t = 0; t < n; ++t) {
            Fiber& f = s.fibers[t];
            if (f.state != FiberState::kRunnable) continue;
            s.current = int(t);
            g_thread = f.tid;
            swapcontext(&s.main, &f.ctx);
            ran = true;
          }
          // Release barriers: the block's when every live fiber waits at it, a warp's likewise.
          bool live = false, all_block = true;
          for (const Fiber& f : s.fibers) {
            if (f.state == FiberState::kDone) continue;
            live = true;
            all_block &= f.state == FiberState::kBlockBarrier;
          }
          if (!live) break;
          bool released = false;
          if (all_block) {
            for (Fiber& f : s.fibers)
              if (f.state == FiberState::kBlockBarrier) f.state = FiberState::kRunnable;
            released = true;
          } else {
            for (unsigned w0 = 0; w0 < n; w0 += 32) {
              bool any = false, all = true;
              for (unsigned t = w0; t < std::min(n, w0 + 32); ++t) {
                const FiberState st = s.fibers[t].state;
                if (st == FiberState::kDone) continue;
                any = true;
                all &= st == FiberState::kWarpBarrier;
              }
              if (any && all) {
                for (unsigned t = w0; t < std::min(n, w0 + 32); ++t)
                  if (s.fibers[t].state == FiberState::kWarpBarrier)
                    s.fibers[t].state = FiberState::kRunnable;
                released = true;
              }
            }
          }
          if (!released && !ran) {
            std::fprintf(stderr, "cuda emu: block (%u,%u,%u) deadlocked at a barrier\n", bx, by,
                         bz);
            std::abort();
          }
        }
      }
  return true;
}

template <typename T>
T Shfl(T v, int src_lane, T (&buf)[64][32]) {
  const unsigned t = g_thread.x + g_block_dim.x * (g_thread.y + g_block_dim.y * g_thread.z);
  const unsigned warp = t / 32, lane = t % 32;
  buf[warp][lane] = v;
  Wait(FiberState::kWarpBarrier);
  const T r = buf[warp][unsigned(src_lane) & 31];
  Wait(FiberState::kWarpBarrier);
  return r;
}

// Posts this lane's fragment words of a warp-wide mma (kA of A, kB of B), waits for the warp at
// a barrier and returns the warp's posted words: A [lane][kA], B [lane][kB]. Two buffers
// alternate per call, so a lane that runs ahead writes the one nobody reads (it cannot get two
// calls ahead: the next barrier waits for everyone).
template <int kA, int kB>
struct PostedFragments {
  const uint32_t (*a)[kA];
  const uint32_t (*b)[kB];
};
template <int kA, int kB>
inline PostedFragments<kA, kB> PostWarpFragments(const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
  static uint32_t fa[2][64][32][kA], fb[2][64][32][kB];
  const unsigned t = g_thread.x + g_block_dim.x * (g_thread.y + g_block_dim.y * g_thread.z);
  const unsigned warp = t / 32, lane = t % 32, p = g_sched.mma_parity[warp][lane]++ & 1u;
  std::memcpy(fa[p][warp][lane], a, sizeof(a));
  std::memcpy(fb[p][warp][lane], b, sizeof(b));
  Wait(FiberState::kWarpBarrier);
  return {fa[p][warp], fb[p][warp]};
}

// Three mma.m16n8k8 (TF32 inputs as fp32 bits, fp32 accumulation) for the warp of the calling
// fiber, c += al·bh + ah·bl + ah·bh (common.cuh Mma3xTf32 gives the fragment layout): every
// lane posts its fragments (PostWarpFragments), each lane computes its 4 outputs.
inline void WarpMma3xTf32(float (&c)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                          const uint32_t (&bh)[2], const uint32_t (&bl)[2]) {
  const uint32_t a[8] = {ah[0], ah[1], ah[2], ah[3], al[0], al[1], al[2], al[3]};
  const uint32_t b[4] = {bh[0], bh[1], bl[0], bl[1]};
  const auto posted = PostWarpFragments(a, b);
  auto f = [](uint32_t u) {
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  };
  const unsigned lane =
      (g_thread.x + g_block_dim.x * (g_thread.y + g_block_dim.y * g_thread.z)) % 32;
  const unsigned g = lane >> 2, tg = lane & 3;
  float sum[4] = {0, 0, 0, 0};
  for (unsigned k = 0; k < 8; ++k) {
    const uint32_t* ra = posted.a[g * 4 + (k & 3)];
    const uint32_t* rb0 = posted.b[2 * tg * 4 + (k & 3)];
    const uint32_t* rb1 = posted.b[(2 * tg + 1) * 4 + (k & 3)];
    const unsigned ia = k < 4 ? 0 : 2, ib = k < 4 ? 0 : 1;
    const float a2[2][2] = {{f(ra[ia]), f(ra[4 + ia])}, {f(ra[ia + 1]), f(ra[4 + ia + 1])}};
    const float b2[2][2] = {{f(rb0[ib]), f(rb0[2 + ib])}, {f(rb1[ib]), f(rb1[2 + ib])}};
    // a2 [row][hi, lo], b2 [col][hi, lo]
    for (int r = 0; r < 2; ++r)
      for (int cc = 0; cc < 2; ++cc)
        sum[r * 2 + cc] += a2[r][1] * b2[cc][0] + a2[r][0] * b2[cc][1] + a2[r][0] * b2[cc][0];
  }
  for (int i = 0; i < 4; ++i) c[i] += sum[i];
}

// One mma.m16n8k16 (bf16 pairs in 32-bit registers, the lower k / column in the low half; fp32
// accumulation) for the warp of the calling fiber (matvec_mma.cu MmaBf16 gives the fragment
// layout), posted by PostWarpFragments.
inline void WarpMmaBf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const auto posted = PostWarpFragments(a, b);
  const unsigned lane =
      (g_thread.x + g_block_dim.x * (g_thread.y + g_block_dim.y * g_thread.z)) % 32;
  const unsigned g = lane >> 2, tg = lane & 3;
  auto half = [](uint32_t r, unsigned k) {  // element k & 1 of a pair, as a float
    return tq::Bf16ToF32(uint16_t((k & 1) ? r >> 16 : r & 0xFFFFu));
  };
  for (unsigned rr = 0; rr < 2; ++rr)      // rows g, g + 8
    for (unsigned cc = 0; cc < 2; ++cc) {  // columns 2 tg, 2 tg + 1
      const unsigned col = 2 * tg + cc;
      float sum = 0.0f;
      for (unsigned k = 0; k < 16; ++k) {
        const unsigned ka = (k & 7) / 2, hi = k >= 8 ? 1u : 0u;
        const float av = half(posted.a[g * 4 + ka][rr + 2 * hi], k);
        const float bv = half(posted.b[col * 4 + ka][hi], k);
        sum += av * bv;
      }
      c[rr * 2 + cc] += sum;
    }
}

}  // namespace tq::emu

#define threadIdx (::tq::emu::g_thread)
#define blockIdx (::tq::emu::g_block)
#define blockDim (::tq::emu::g_block_dim)
#define gridDim (::tq::emu::g_grid_dim)

inline void __syncthreads() { ::tq::emu::Wait(::tq::emu::FiberState::kBlockBarrier); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
  const unsigned lane = threadIdx.x % 32;
  return ::tq::emu::Shfl(v, int(lane ^ unsigned(o)), ::tq::emu::g_sched.shfl_f);
}
inline float __shfl_sync(unsigned, float v, int src) {
  return ::tq::emu::Shfl(v, src, ::tq::emu::g_sched.shfl_f);
}
inline double __shfl_xor_sync(unsigned, double v, int o) {
  const unsigned lane = threadIdx.x % 32;
  return ::tq::emu::Shfl(v, int(lane ^ unsigned(o)), ::tq::emu::g_sched.shfl_d);
}
// The warp's live fibers meet (the shuffles' barrier).
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::tq::emu::Wait(::tq::emu::FiberState::kWarpBarrier);
}
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
inline int atomicCAS(int* p, int cmp, int val) {
  const int old = *p;
  if (old == cmp) *p = val;
  return old;
}
inline float atomicAdd(float* p, float v) {  // fibers of one OS thread: never concurrent
  const float old = *p;
  *p = old + v;
  return old;
}
inline float __fadd_rn(float a, float b) { return a + b; }
[[noreturn]] inline void __trap() {
  std::fprintf(stderr, "cuda emu: __trap() in a kernel\n");
  std::abort();
}
// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {x, y} (no sign replication: the
// kernels never set bit 3 of a selector).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = uint64_t(x) | uint64_t(y) << 32;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= unsigned((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// CUDA's vector types (16- and 8-byte loads of the kernels).
struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct float4 {
  float x, y, z, w;
};
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __half __ushort_as_half(unsigned short h) { return __half{h}; }
inline float __half2float(__half h) { return tq::F16ToF32(h.bits); }
inline __half __float2half_rn(float f) { return __half{tq::F32ToF16(f)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{tq::F32ToBf16(f)}; }

// --- the runtime API, on host memory ---
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
using cudaStream_t = struct EmuStream*;
inline constexpr unsigned cudaStreamNonBlocking = 1;
struct cudaDeviceProp {
  char name[256];
  int major, minor;
  size_t totalGlobalMem;
};

namespace tq::emu {
inline constexpr size_t kEmuMemory = size_t(8) << 30;
inline size_t g_allocated = 0;
inline std::map<void*, size_t> g_allocations;
inline cudaError_t g_last_error = cudaSuccess;
// Dynamic shared memory limits raised by cudaFuncSetAttribute, per kernel (default 48 KiB): a
// launch asking for more than its kernel's limit fails as on a device.
inline std::map<const void*, int> g_smem_limit;
inline bool SmemAllowed(const void* kernel, size_t bytes) {
  const auto it = g_smem_limit.find(kernel);
  return bytes <= size_t(it == g_smem_limit.end() ? 48 * 1024 : it->second);
}
}  // namespace tq::emu

inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrReservedSharedMemoryPerBlock = 111
};
// Three SMs (a launch sized "one block per SM" gives blocks several tiles in the tests' shapes);
// 1 KiB of reserved shared memory a block, as sm_80 .. sm_90.
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMultiProcessorCount ? 3 : 1024;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::snprintf(p->name, sizeof(p->name), "host emulator");
  p->major = 9;
  p->minor = 0;
  p->totalGlobalMem = tq::emu::kEmuMemory;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
// Events and pinned host memory: every call completes at once here, so an event is always
// complete and a wait on one has nothing to wait for.
using cudaEvent_t = struct EmuEvent*;
inline constexpr unsigned cudaEventDisableTiming = 2;
inline constexpr unsigned cudaHostAllocDefault = 0;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
inline cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  using namespace tq::emu;
  if (bytes > kEmuMemory - g_allocated) return g_last_error = cudaErrorMemoryAllocation;
  *p = std::malloc(bytes ? bytes : 1);
  g_allocations[*p] = bytes;
  g_allocated += bytes;
  return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
inline cudaError_t cudaFree(void* p) {
  using namespace tq::emu;
  auto it = g_allocations.find(p);
  if (it == g_allocations.end()) return cudaErrorInvalidValue;
  g_allocated -= it->second;
  g_allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {
  std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  const auto* a = static_cast<const char*>(d);
  const auto* b = static_cast<const char*>(s);
  if (n && a < b + n && b < a + n) {
    std::fprintf(stderr, "cuda emu: cudaMemcpy of overlapping ranges (undefined on a device)\n");
    std::abort();
  }
  std::memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k,
                                   cudaStream_t) {
  return cudaMemcpy(d, s, n, k);
}
inline cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total_b) {
  *free_b = tq::emu::kEmuMemory - tq::emu::g_allocated;
  *total_b = tq::emu::kEmuMemory;
  return cudaSuccess;
}
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F* f, cudaFuncAttribute, int bytes) {
  if (bytes > 227 * 1024) return cudaErrorInvalidValue;
  tq::emu::g_smem_limit[reinterpret_cast<const void*>(f)] = bytes;
  return cudaSuccess;
}
// Two blocks an SM of any kernel whose shared memory fits (the split plans' waves).
template <typename F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F*, int threads,
                                                                 size_t smem) {
  *blocks = threads <= 1024 && smem <= 227 * 1024 ? 2 : 0;
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = tq::emu::g_last_error;
  tq::emu::g_last_error = cudaSuccess;
  return e;
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    default:
      return "invalid argument";
  }
}

// kernel<<<grid, block, 0, stream>>>(args...) of kernels/cuda/ (TQ_LAUNCH).
#define TQ_EMU_LAUNCH(kernel, grid, block, ...)                                    \
  do {                                                                             \
    if (!::tq::emu::Launch(dim3(grid), dim3(block), [&] { kernel(__VA_ARGS__); })) \
      ::tq::emu::g_last_error = cudaErrorInvalidConfiguration;                     \
  } while (0)
// The same with `smem` bytes of dynamic shared memory, refused above the kernel's limit.
#define TQ_EMU_LAUNCH_SMEM(kernel, grid, block, smem, ...)                              \
  do {                                                                                  \
    if (!::tq::emu::SmemAllowed(reinterpret_cast<const void*>(kernel), size_t(smem)))   \
      ::tq::emu::g_last_error = cudaErrorInvalidValue;                                  \
    else if (!::tq::emu::Launch(dim3(grid), dim3(block), [&] { kernel(__VA_ARGS__); })) \
      ::tq::emu::g_last_error = cudaErrorInvalidConfiguration;                          \
  } while (0)
