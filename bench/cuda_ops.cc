// CUDA backend kernels on the Llama-3.1-8B shapes (hidden 4096, FFN 14336, 32 heads / 8 KV heads,
// head_dim 128): bytes moved per call, time per call and GB/s — the roofline rows of
// docs/BENCHMARKS.md's GPU section. Each iteration enqueues kBatch calls on the backend's stream
// and synchronizes once, so the time per call includes the launch (as a decode step pays it) but
// not a host round trip. Skips (one line) without a CUDA build or a GPU.
//   bench_cuda_ops [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/backend.h"
#include "quant/codebook.h"
#include "quant/hadamard.h"
#include "quant/packing.h"
#if defined(TQ_WITH_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tq::kernels {
namespace {

constexpr int kBatch = 20;

Backend* Gpu() {
#if defined(TQ_WITH_CUDA)
  static std::unique_ptr<Backend> gpu = CudaDeviceCountImpl() > 0 ? MakeCudaBackend(0) : nullptr;
  return gpu.get();
#else
  return nullptr;
#endif
}

DeviceBuffer RandomBytes(Backend& b, size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& x : v) x = uint8_t(rng());
  return b.Upload(v.data(), n, "bench");
}
DeviceBuffer Halfs(Backend& b, size_t n, float value) {
  std::vector<uint16_t> v(n, F32ToF16(value));
  return b.Upload(v.data(), n * 2, "bench");
}
DeviceBuffer RandomBf16(Backend& b, size_t n, uint32_t seed) {  // N(0, 0.02): never time zeros
  std::vector<uint16_t> v(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (auto& x : v) x = F32ToBf16(d(rng));
  return b.Upload(v.data(), n * 2, "bench");
}
DeviceBuffer Floats(Backend& b, size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (auto& x : v) x = d(rng);
  return b.Upload(v.data(), n * 4, "bench");
}

// Times kBatch calls of f per iteration; reports GB/s for `bytes` per call (and TFLOP/s for
// `flops` per call when given).
template <typename F>
void Time(benchmark::State& state, Backend& gpu, double bytes, F&& f, double flops = 0) {
  f();
  gpu.Synchronize();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) f();
    gpu.Synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s / kBatch);
  }
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MB"] = bytes / 1e6;
  if (flops > 0)
    state.counters["TFLOP/s"] =
        benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

// A random rows x cols packed matrix in the backend's memory: codebook codes of format f, fp16
// scales (0.01) of groups of 128; `bytes` is what a product reads of it.
struct BenchPacked {
  DeviceBuffer codes, scales, codebook;
  PackedMatrix w;
  double bytes = 0;
};
BenchPacked MakePacked(Backend& gpu, quant::CodeFormat f, int64_t rows, int64_t cols) {
  constexpr int64_t g = 128;
  BenchPacked p;
  const int64_t row_bytes = int64_t(quant::PackedBytes(f, cols));
  p.codes = RandomBytes(gpu, size_t(rows * row_bytes), 1);
  p.scales = Halfs(gpu, size_t(rows * cols / g), 0.01f);
  // q8: the linear codebook of convert's q8 tier (the LM head's), which the tensor-core matvec
  // takes; the others Gaussian.
  const bool linear = f == quant::CodeFormat::kQ8;
  const auto& book = linear ? quant::LinearQ8Codebook().levels : quant::GaussianCodebook(f).levels;
  p.codebook = gpu.Upload(book.data(), book.size() * 4, "codebook");
  if (linear) p.w.linear_q8_step = book[129];
  p.w.format = f;
  p.w.rows = rows;
  p.w.cols = cols;
  p.w.group_size = g;
  p.w.codes = p.codes.as<uint8_t>();
  p.w.row_bytes = row_bytes;
  p.w.scales = p.scales.as<uint16_t>();
  p.w.codebook = p.codebook.as<float>();
  p.bytes = double(rows * row_bytes + rows * cols / g * 2);
  return p;
}

// PackedMatMul: rows x cols q4 (codebook, fp16 scales, group 128), n tokens.
void BM_PackedMatMul(benchmark::State& state) {
  Backend* gpu = Gpu();
  if (!gpu) return state.SkipWithError("no CUDA device");
  const int64_t rows = state.range(0), cols = state.range(1), n = state.range(2);
  const BenchPacked p =
      MakePacked(*gpu, static_cast<quant::CodeFormat>(state.range(3)), rows, cols);
  auto x = Floats(*gpu, size_t(n * cols), 2);
  auto y = gpu->Allocate(size_t(n * rows) * 4, "y");
  const double bytes = p.bytes + double(n * cols * 4 + n * rows * 4);
  Time(
      state, *gpu, bytes, [&] { gpu->PackedMatMul(x.as<float>(), n, p.w, nullptr, y.as<float>()); },
      2.0 * double(n * rows * cols));
}

// RotatedPackedMatMulGroup: the same q4 matrix over R x, one token, R the converter's Hadamard
// rotation of `cols` (blocks of up to 4,096); fused = 1: the backend's own (the rotation inside
// the tensor-core kernel where it can), 0: Backend's default (the rotation kernel, then the
// product) — the two ways a decode step's packed linear can take.
void BM_RotatedPackedMatMul(benchmark::State& state) {
  Backend* gpu = Gpu();
  if (!gpu) return state.SkipWithError("no CUDA device");
  const int64_t rows = state.range(0), cols = state.range(1);
  const bool fused = state.range(2) != 0;
  const BenchPacked p = MakePacked(*gpu, quant::CodeFormat::kQ4, rows, cols);
  const auto rot = quant::HadamardRotation::Make(cols, 3);
  auto signs = gpu->Upload(rot.signs().data(), size_t(cols), "signs");
  auto x = Floats(*gpu, size_t(cols), 2);
  auto y = gpu->Allocate(size_t(rows) * 4, "y");
  const RotationView r{signs.as<int8_t>(), cols, rot.block()};
  const PackedMatMulOutput out{&p.w, nullptr, y.as<float>()};
  Time(state, *gpu, p.bytes + double(cols * 4 + rows * 4), [&] {
    if (fused)
      gpu->RotatedPackedMatMulGroup(r, x.as<float>(), 1, {&out, 1});
    else
      gpu->Backend::RotatedPackedMatMulGroup(r, x.as<float>(), 1, {&out, 1});
  });
}

// MatMul with bf16 weights.
void BM_MatMulBf16(benchmark::State& state) {
  Backend* gpu = Gpu();
  if (!gpu) return state.SkipWithError("no CUDA device");
  const int64_t rows = state.range(0), cols = state.range(1), n = state.range(2);
  auto wb = RandomBf16(*gpu, size_t(rows * cols), 7);
  auto x = Floats(*gpu, size_t(n * cols), 2);
  auto y = gpu->Allocate(size_t(n * rows) * 4, "y");
  const TensorView w{wb.data(), DType::BF16, {rows, cols}};
  const double bytes = double(rows * cols * 2 + n * cols * 4 + n * rows * 4);
  Time(
      state, *gpu, bytes, [&] { gpu->MatMul(x.as<float>(), n, w, nullptr, y.as<float>()); },
      2.0 * double(n * rows * cols));
}

// Decode attention over an fp16 plain cache of `ctx` positions (32 heads / 8 KV heads, d 128).
void BM_AttentionF16(benchmark::State& state) {
  Backend* gpu = Gpu();
  if (!gpu) return state.SkipWithError("no CUDA device");
  const int64_t ctx = state.range(0), H = 32, KV = 8, d = 128;
  auto k = Halfs(*gpu, size_t(KV * ctx * d), 0.01f), v = Halfs(*gpu, size_t(KV * ctx * d), 0.01f);
  auto q = Floats(*gpu, size_t(H * d), 3);
  auto out = gpu->Allocate(size_t(H * d) * 4, "out");
  const AttentionParams p{H, KV, d, 0.088f, 0};
  const double bytes = double(2 * KV * ctx * d * 2);
  Time(state, *gpu, bytes, [&] {
    gpu->Attention(q.as<float>(), 1, ctx - 1, KvView{k.data(), v.data(), DType::F16, ctx * d}, p,
                   out.as<float>());
  });
}

// One decode step's append of keys or values to the TurboQuant cache: `n` positions of 8 KV heads,
// head_dim 128, coded at `bits` (q4 / q3 / q8) with the MSE-refined scale (the default).
void BM_KvEncode(benchmark::State& state) {
  Backend* gpu = Gpu();
  if (!gpu) return state.SkipWithError("no CUDA device");
  const int64_t n = state.range(0), bits = state.range(1), KV = 8, d = 128;
  const auto& book = quant::GaussianCodebook(int(bits));
  std::vector<float> thresholds(book.levels.size() - 1);
  for (size_t i = 0; i + 1 < book.levels.size(); ++i)
    thresholds[i] = 0.5f * (book.levels[i] + book.levels[i + 1]);
  auto levels = gpu->Upload(book.levels.data(), book.levels.size() * 4, "levels");
  auto thr = gpu->Upload(thresholds.data(), thresholds.size() * 4, "thresholds");
  KvEncodeParams p;
  p.format.dim = d;
  p.format.group = d;
  p.format.num_segments = 1;
  const quant::CodeFormat f = *quant::FormatForBits(int(bits));
  p.format.segments[0] = {0, d, f, levels.as<float>(), 0};
  p.format.segments[0].thresholds = thr.as<float>();
  p.format.code_bytes = int64_t(quant::PackedBytes(f, d));
  p.scale = KvScale::kMse;
  auto x = Floats(*gpu, size_t(n * KV * d), 7);
  auto codes = gpu->Allocate(size_t(KV * n * p.format.code_bytes), "codes");
  auto scales = gpu->Allocate(size_t(KV * n) * 2, "scales");
  KvCodeSlots slots;
  slots.codes = codes.as<uint8_t>();
  slots.scales = scales.as<uint16_t>();
  slots.head_stride = n;
  const double bytes = double(n * KV * (d * 4 + p.format.code_bytes + 2));
  Time(state, *gpu, bytes,
       [&] { gpu->KvEncode(p, x.as<float>(), DType::F32, n, KV, KV * d, d, slots, 0); });
}

// Decode attention on a compressed cache of `ctx` coded positions, K4 V3 or K8 V3 (`kbits`,
// group 128).
void BM_CompressedAttention(benchmark::State& state) {
  Backend* gpu = Gpu();
  if (!gpu) return state.SkipWithError("no CUDA device");
  const int64_t ctx = state.range(0), kbits = state.range(1), H = 32, KV = 8, d = 128;
  static const auto rk = quant::HadamardRotation::Make(d, 1, d),
                    rv = quant::HadamardRotation::Make(d, 2, d);
  const auto& l4 = quant::GaussianCodebook(4).levels;
  const auto& l3 = quant::GaussianCodebook(3).levels;
  auto t4 = gpu->Upload(l4.data(), l4.size() * 4, "levels"),
       t3 = gpu->Upload(l3.data(), l3.size() * 4, "levels");
  CompressedKvView kv;
  kv.k_rotation = &rk;
  kv.v_rotation = &rv;
  auto fmt_of = [&](quant::CodeFormat f, const float* levels) {
    KvCodeFormat cf;
    cf.dim = d;
    cf.group = d;
    cf.num_segments = 1;
    cf.segments[0] = {0, d, f, levels, 0};
    cf.code_bytes = int64_t(quant::PackedBytes(f, d));
    return cf;
  };
  const auto u8 = [] {  // 8-bit keys: any 256 levels (the timing does not depend on them)
    std::vector<float> l(256);
    for (int c = 0; c < 256; ++c) l[size_t(c)] = (c - 127.5f) / 64.0f;
    return l;
  }();
  auto t8 = gpu->Upload(u8.data(), u8.size() * 4, "levels");
  kv.k_format = kbits == 8 ? fmt_of(quant::CodeFormat::kQ8, t8.as<float>())
                           : fmt_of(quant::CodeFormat::kQ4, t4.as<float>());
  kv.v_format = fmt_of(quant::CodeFormat::kQ3, t3.as<float>());
  auto kc = RandomBytes(*gpu, size_t(KV * ctx * kv.k_format.code_bytes), 4);
  auto vc = RandomBytes(*gpu, size_t(KV * ctx * kv.v_format.code_bytes), 5);
  auto ks = Halfs(*gpu, size_t(KV * ctx), 0.1f), vs = Halfs(*gpu, size_t(KV * ctx), 0.1f);
  kv.num_spans = 1;
  KvSpan& s = kv.spans[0];
  s.begin = 0;
  s.end = ctx;
  s.head_stride = ctx;
  s.coded = true;
  s.k_codes = kc.as<uint8_t>();
  s.v_codes = vc.as<uint8_t>();
  s.k_scales = ks.as<uint16_t>();
  s.v_scales = vs.as<uint16_t>();
  auto q = Floats(*gpu, size_t(H * d), 3);
  auto out = gpu->Allocate(size_t(H * d) * 4, "out");
  const AttentionParams p{H, KV, d, 0.088f, 0};
  const double bytes = double(KV * ctx * (kv.k_format.code_bytes + kv.v_format.code_bytes + 4));
  Time(state, *gpu, bytes,
       [&] { gpu->CompressedAttention(q.as<float>(), 1, ctx - 1, kv, p, out.as<float>()); });
}

constexpr int kQ4 = int(quant::CodeFormat::kQ4), kQ3 = int(quant::CodeFormat::kQ3),
              kQ2 = int(quant::CodeFormat::kQ2), kQ8 = int(quant::CodeFormat::kQ8);

BENCHMARK(BM_PackedMatMul)
    ->Args({14336, 4096, 1, kQ4})
    ->Args({4096, 14336, 1, kQ4})
    ->Args({14336, 4096, 1, kQ3})
    ->Args({14336, 4096, 1, kQ2})
    ->Args({4096, 4096, 1, kQ4})
    ->Args({1024, 4096, 1, kQ4})
    ->Args({14336, 4096, 8, kQ4})
    ->Args({14336, 4096, 512, kQ4})
    ->Args({128256, 4096, 1, kQ8})
    ->UseManualTime();
BENCHMARK(BM_RotatedPackedMatMul)
    ->Args({4096, 4096, 1})
    ->Args({4096, 4096, 0})
    ->Args({4096, 14336, 1})
    ->Args({4096, 14336, 0})
    ->Args({28672, 4096, 1})
    ->Args({28672, 4096, 0})
    ->UseManualTime();
BENCHMARK(BM_MatMulBf16)
    ->Args({14336, 4096, 1})
    ->Args({4096, 14336, 1})
    ->Args({4096, 4096, 1})
    ->Args({14336, 4096, 8})
    ->Args({14336, 4096, 512})
    ->UseManualTime();
BENCHMARK(BM_AttentionF16)->Arg(512)->Arg(32768)->UseManualTime();
BENCHMARK(BM_CompressedAttention)
    ->Args({512, 4})
    ->Args({4096, 4})
    ->Args({32768, 4})
    ->Args({32768, 8})
    ->UseManualTime();
BENCHMARK(BM_KvEncode)->Args({1, 4})->Args({1, 3})->Args({1, 8})->Args({512, 4})->UseManualTime();

}  // namespace
}  // namespace tq::kernels

BENCHMARK_MAIN();
