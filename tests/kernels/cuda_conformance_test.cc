// The CUDA backend against the scalar oracle, op by op (llama.cpp test-backend-ops style): every
// op × dtype / format × bits × group size × scale format on awkward shapes (1, 9 and 257 rows,
// dims that are not multiples of 32 where the op allows). The bound of each comparison is written
// next to it; every comparison lands in the table printed at exit. Without CUDA or a GPU every
// test skips with the reason.
//
// The oracle: RefBackend() (MatMul, RmsNorm, RoPE, SiLU, attention, MoE routing),
// ref::PackedMatMul / RefCompressedAttention, quant::RotateForward, and for pure data movement
// (embedding rows, KV store, gather, scatter-add, argmax, copy) the obvious loop written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "cuda_test_util.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"
#include "quant/hadamard.h"

namespace tq::kernels {
namespace {

using test::Down;
using test::Expect;
using test::ExpectExact;
using test::Poisoned;
using test::Up;

// Bounds (NMSE against the double-accumulating oracle). fp32 accumulation over K terms leaves
// a relative error ~√K · 6e-8, i.e. an NMSE below 1e-11 for K <= 4096; a wrong index, scale or
// code gives O(1e-3 .. 1).
constexpr double kFp32Bound = 1e-10;      // matmuls, norms, RoPE, rotation, SiLU
constexpr double kAttentionBound = 1e-9;  // softmax over up to 32K positions
// Packed prefill (n > 8) runs on the tensor cores in 3xTF32, whose fp32 accumulation inside
// mma truncates: NMSE ~1e-9 at K = 4608 (measured 1.0-1.4e-9 on the H200); a wrong index, scale
// or code still gives O(1e-3 .. 1).
constexpr double kTensorCoreBound = 1e-8;
// Products of more than 8 tokens run as bf16 GEMMs (cuda_backend.cc GemmMode): packed weights are
// dequantized to bf16 and x rounded to bf16 once (auto), each rounding a relative error below
// 2^-8, an NMSE ~2.5e-6 per rounded operand; dense bf16 weights are exact and x is split into two
// bf16 parts (auto), so only the tensor cores' fp32 accumulation is left (kTensorCoreBound).
constexpr double kBf16Bound = 3e-5;
// The 1-token q4 product on the tensor cores (matvec_mma.cu): the 16 codebook levels rounded to
// bf16 (relative 2^-9), x split into bf16 hi + lo (~2^-17): NMSE ~1e-6.
constexpr double kMatVecMmaBound = kBf16Bound;

std::vector<float> Random(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> ToBytes(const std::vector<float>& src, DType dt) {
  std::vector<uint8_t> b(src.size() * DTypeSize(dt));
  if (dt == DType::F32) {
    std::memcpy(b.data(), src.data(), b.size());
  } else {
    auto* h = reinterpret_cast<uint16_t*>(b.data());
    for (size_t i = 0; i < src.size(); ++i)
      h[i] = dt == DType::F16 ? F32ToF16(src[i]) : F32ToBf16(src[i]);
  }
  return b;
}

std::string Name(DType dt) { return std::string(DTypeName(dt)); }

// Every test runs on "cuda" (a GPU) and "emu" (the same kernels on the host emulator).
class CudaConformance : public ::testing::TestWithParam<std::string> {
 protected:
  // The emulator runs each CUDA thread as a fiber (~1 µs a switch): its largest shapes are left
  // to the GPU (their code paths are those of the smaller shapes).
  bool Emulated() const { return GetParam() == "emu"; }
};
INSTANTIATE_TEST_SUITE_P(Backends, CudaConformance, ::testing::ValuesIn(test::kCudaKinds),
                         [](const auto& info) { return info.param; });

// --- dense matmul ---------------------------------------------------------------------------

TEST_P(CudaConformance, MatMul) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct S {
    int64_t n, out, in;
  };
  // {n <= 8, in * elem size % 16 == 0}: the 16-byte matvec (4104 = 513 bf16 pieces: several
  // loop trips and a short one); the rest the generic kernels.
  const S shapes[] = {{1, 37, 77},  {2, 96, 256}, {3, 1031, 33},    {5, 37, 77},
                      {8, 96, 256}, {9, 37, 77},  {17, 96, 256},    {64, 131, 300},
                      {1, 5, 4104}, {7, 9, 4104}, {257, 131, 1100}, {70, 7, 1}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (const S& s : shapes) {
      if (Emulated() && s.n * s.out * s.in > 4000000) continue;  // minutes of fibers; GPU only
      const auto x = Random(s.n * s.in, 1);
      const auto wf = Random(s.out * s.in, 2, 0.05f);
      const auto wb = ToBytes(wf, dt);
      const auto bias = Random(s.out, 3);
      const bool with_bias = s.n % 2 == 1;
      const TensorView hw{wb.data(), dt, {s.out, s.in}};
      std::vector<float> want(static_cast<size_t>(s.n * s.out));
      RefBackend().MatMul(x.data(), s.n, hw, with_bias ? bias.data() : nullptr, want.data());
      auto dx = Up(*gpu, x), dw = Up(*gpu, wb), db = Up(*gpu, bias);
      auto dy = Poisoned<float>(*gpu, want.size());
      const TensorView w{dw.data(), dt, {s.out, s.in}};
      gpu->MatMul(dx.as<float>(), s.n, w, with_bias ? db.as<float>() : nullptr, dy.as<float>());
      Expect("MatMul",
             fmt::format("{} n={} out={} in={}{}", Name(dt), s.n, s.out, s.in,
                         with_bias ? " bias" : ""),
             Down<float>(*gpu, dy, want.size()), want,
             s.n > 8 && dt == DType::BF16 ? kTensorCoreBound : kFp32Bound);
    }
  }
}

TEST_P(CudaConformance, MatMulGroup) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (int64_t n : {1, 7, 16, 130}) {
    const int64_t in = 72;
    const auto x = Random(n * in, 20);
    const int64_t outs_rows[] = {50, 9, 100};
    const DType dts[] = {DType::BF16, DType::F16, DType::F32};
    std::vector<std::vector<uint8_t>> host(3);
    std::vector<DeviceBuffer> dw, dy;
    std::vector<TensorView> views(3);
    const auto bias = Random(100, 24);
    auto dx = Up(*gpu, x), db = Up(*gpu, bias);
    for (int i = 0; i < 3; ++i) {
      host[size_t(i)] = ToBytes(Random(outs_rows[i] * in, 21 + i), dts[i]);
      dw.push_back(Up(*gpu, host[size_t(i)]));
      dy.push_back(Poisoned<float>(*gpu, size_t(n * outs_rows[i])));
      views[size_t(i)] = TensorView{dw.back().data(), dts[i], {outs_rows[i], in}};
    }
    const MatMulOutput outs[] = {{&views[0], nullptr, dy[0].as<float>()},
                                 {&views[1], db.as<float>(), dy[1].as<float>()},
                                 {&views[2], db.as<float>(), dy[2].as<float>()}};
    gpu->MatMulGroup(dx.as<float>(), n, outs);
    for (int i = 0; i < 3; ++i) {
      const TensorView hw{host[size_t(i)].data(), dts[i], {outs_rows[i], in}};
      std::vector<float> want(static_cast<size_t>(n * outs_rows[i]));
      RefBackend().MatMul(x.data(), n, hw, i ? bias.data() : nullptr, want.data());
      Expect("MatMulGroup", fmt::format("n={} output {} ({})", n, i, Name(dts[i])),
             Down<float>(*gpu, dy[size_t(i)], want.size()), want,
             n > 8 && dts[i] == DType::BF16 ? kTensorCoreBound : kFp32Bound);
    }
  }
  // Mismatched inner dimensions are refused before anything runs.
  auto a = gpu->Allocate(8 * 16 * 4, "a"), b = gpu->Allocate(8 * 17 * 4, "b");
  const TensorView va{a.data(), DType::F32, {8, 16}}, vb{b.data(), DType::F32, {8, 17}};
  const MatMulOutput bad[] = {{&va, nullptr, b.as<float>()}, {&vb, nullptr, b.as<float>()}};
  EXPECT_THROW(gpu->MatMulGroup(a.as<float>(), 1, bad), Error);
  const TensorView vi{a.data(), DType::I32, {8, 16}};
  EXPECT_THROW(gpu->MatMul(a.as<float>(), 1, vi, nullptr, b.as<float>()), Error);
}

// --- packed matmul and packed embeddings ----------------------------------------------------

// A packed matrix's arrays on the device and the view of them.
struct DevicePacked {
  DeviceBuffer codes, scales, scale_codes, scale_table, mins, codebook;
  PackedMatrix view;
};
DevicePacked ToDevice(Backend& b, const test::Owned& o) {
  DevicePacked d;
  const PackedMatrix& h = o.view;
  const int64_t groups = h.rows * (h.cols / h.group_size);
  d.view = h;
  d.codes = b.Upload(h.codes, size_t(h.rows * h.row_bytes), "codes");
  d.view.codes = d.codes.as<uint8_t>();
  if (h.scales) {
    d.scales = b.Upload(h.scales, size_t(groups) * 2, "scales");
    d.view.scales = d.scales.as<uint16_t>();
  }
  if (h.scale_codes) {
    d.scale_codes = b.Upload(h.scale_codes, size_t(groups), "scale codes");
    d.scale_table = b.Upload(h.scale_table, 256 * 4, "scale table");
    d.view.scale_codes = d.scale_codes.as<uint8_t>();
    d.view.scale_table = d.scale_table.as<float>();
  }
  if (h.mins) {
    d.mins = b.Upload(h.mins, size_t(groups) * 2, "mins");
    d.view.mins = d.mins.as<uint16_t>();
  }
  if (h.codebook) {
    d.codebook = b.Upload(h.codebook, size_t(quant::Traits(h.format).levels) * 4, "codebook");
    d.view.codebook = d.codebook.as<float>();
  }
  return d;
}

// Poisoned destinations [n, rows] for each member of a group and the outputs that write them;
// member `biased` adds `bias` (the others none).
struct GroupOutputs {
  std::vector<DeviceBuffer> dy;
  std::vector<PackedMatMulOutput> outs;
};
GroupOutputs MakeGroupOutputs(Backend& gpu, const std::vector<DevicePacked>& dev, int64_t n,
                              const float* bias, size_t biased) {
  GroupOutputs g;
  for (size_t i = 0; i < dev.size(); ++i) {
    g.dy.push_back(Poisoned<float>(gpu, size_t(n * dev[i].view.rows)));
    g.outs.push_back({&dev[i].view, i == biased ? bias : nullptr, g.dy.back().as<float>()});
  }
  return g;
}

struct PackedKind {
  quant::QuantMethod method;
  quant::CodeFormat format;
  test::Scales scales;
};
std::vector<PackedKind> AllPackedKinds() {
  using quant::CodeFormat;
  std::vector<PackedKind> k;
  for (CodeFormat f : {CodeFormat::kQ1, CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4,
                       CodeFormat::kQ8, CodeFormat::kTernary})
    for (test::Scales s : {test::Scales::kF16, test::Scales::kE8})
      k.push_back({quant::QuantMethod::kCodebook, f, s});
  for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8})
    k.push_back({quant::QuantMethod::kAffine, f, test::Scales::kF16});
  return k;
}
std::string KindName(const PackedKind& k, int64_t g) {
  return fmt::format("{}{} g{} {}", quant::Traits(k.format).name,
                     k.method == quant::QuantMethod::kAffine ? " affine" : "", g,
                     k.scales == test::Scales::kE8 ? "e8" : "f16");
}

TEST_P(CudaConformance, PackedMatMul) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  // cols 640: every group size and whole ternary chunks; 352: a short last ternary chunk (32
  // trits) and a binary row of 11 units; rows odd.
  struct S {
    int64_t rows, cols;
  };
  for (const PackedKind& k : AllPackedKinds()) {
    for (int64_t g : {16, 32, 64, 128}) {
      // 4608 = 144 units: the matvec's unrolled loop twice, the second trip short (and 5 column
      // tiles of the 1-token kernel, the last one short); 9216 = 9 tiles: warps of two tiles.
      for (const S s : {S{37, 640}, S{5, 352}, S{3, 4608}, S{9, 9216}}) {
        if (s.cols % g) continue;
        if ((s.cols == 4608 || s.cols == 9216) && g != 64) continue;
        const test::Owned o = test::RandomPacked(k.method, k.format, s.rows, s.cols, g,
                                                 uint32_t(s.rows + g), k.scales);
        DevicePacked d = ToDevice(*gpu, o);
        const auto bias = Random(s.rows, 5);
        auto db = Up(*gpu, bias);
        for (int64_t n : {1, 5, 8, 9, 257}) {
          if (s.rows == 5 && n == 257 && g != 32) continue;  // prefill covered by the 37-row case
          if (s.cols == 9216 && n != 1) continue;
          // The GEMM's mma exchanges cost the emulator ~1 s a case: there, one group size and
          // scale format of each code format (the GPU runs them all).
          if (Emulated() && n > 8 && (s.cols == 4608 || g != 32 || k.scales != test::Scales::kF16))
            continue;
          const auto x = Random(n * s.cols, uint64_t(n));
          const bool with_bias = n % 2 == 1;
          std::vector<float> want(static_cast<size_t>(n * s.rows));
          ref::PackedMatMul(x.data(), n, o.view, with_bias ? bias.data() : nullptr, want.data());
          auto dx = Up(*gpu, x);
          // One token: each kernel of TURBOQUANT_CUDA_MATVEC (mma, the default, where it applies).
          for (const char* kind : {"rows", "tiles", "async", "mma"}) {
            if (n != 1 && kind[0] != 'r') break;
            setenv("TURBOQUANT_CUDA_MATVEC", kind, 1);
            auto dy = Poisoned<float>(*gpu, want.size());
            gpu->PackedMatMul(dx.as<float>(), n, d.view, with_bias ? db.as<float>() : nullptr,
                              dy.as<float>());
            unsetenv("TURBOQUANT_CUDA_MATVEC");
            Expect("PackedMatMul",
                   fmt::format("{} [{}, {}] n={}{}", KindName(k, g), s.rows, s.cols, n,
                               n == 1 ? std::string(" ") + kind : ""),
                   Down<float>(*gpu, dy, want.size()), want,
                   n > 8            ? kBf16Bound
                   : kind[0] == 'm' ? kMatVecMmaBound
                                    : kFp32Bound);
          }
        }
      }
    }
  }
}

// q/k/v- and gate/up-like groups over one input (one launch on cuda when every member shares
// format, method, cols and group size), and a mixed group (member by member).
TEST_P(CudaConformance, PackedMatMulGroup) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  using quant::CodeFormat;
  using quant::QuantMethod;
  struct M {
    QuantMethod method;
    CodeFormat format;
    int64_t rows, cols, group;
  };
  const std::vector<std::vector<M>> groups = {
      {{QuantMethod::kCodebook, CodeFormat::kQ4, 96, 512, 64},
       {QuantMethod::kCodebook, CodeFormat::kQ4, 32, 512, 64},
       {QuantMethod::kCodebook, CodeFormat::kQ4, 33, 512, 64}},
      {{QuantMethod::kCodebook, CodeFormat::kQ3, 300, 256, 32},
       {QuantMethod::kCodebook, CodeFormat::kQ3, 300, 256, 32}},
      {{QuantMethod::kAffine, CodeFormat::kQ8, 40, 128, 128},
       {QuantMethod::kAffine, CodeFormat::kQ8, 17, 128, 128}},
      {{QuantMethod::kCodebook, CodeFormat::kQ4, 20, 256, 32},
       {QuantMethod::kCodebook, CodeFormat::kQ2, 20, 256, 32}}};  // mixed: one by one
  uint32_t seed = 100;
  for (const auto& members : groups) {
    std::vector<test::Owned> host;
    std::vector<DevicePacked> dev;
    for (const M& m : members) {
      host.push_back(test::RandomPacked(m.method, m.format, m.rows, m.cols, m.group, ++seed));
      dev.push_back(ToDevice(*gpu, host.back()));
    }
    const int64_t cols = members[0].cols;
    const auto bias = Random(300, 31);
    auto db = Up(*gpu, bias);
    for (int64_t n : {1, 3, 8, 12}) {
      if (Emulated() && n == 3) continue;  // the emulator: n = 1, 8 and 12 (cheap)
      const auto x = Random(n * cols, uint64_t(n) + 40);
      auto dx = Up(*gpu, x);
      // One token: each kernel of TURBOQUANT_CUDA_MATVEC (mma, the default, where it applies).
      for (const char* kind : {"rows", "tiles", "async", "mma"}) {
        if (n != 1 && kind[0] != 'r') break;
        const GroupOutputs o = MakeGroupOutputs(*gpu, dev, n, db.as<float>(), 1);
        setenv("TURBOQUANT_CUDA_MATVEC", kind, 1);
        gpu->PackedMatMulGroup(dx.as<float>(), n, o.outs);
        unsetenv("TURBOQUANT_CUDA_MATVEC");
        for (size_t i = 0; i < members.size(); ++i) {
          std::vector<float> want(size_t(n * members[i].rows));
          ref::PackedMatMul(x.data(), n, host[i].view, i == 1 ? bias.data() : nullptr, want.data());
          Expect("PackedMatMulGroup",
                 fmt::format("{} of {}: {} [{}, {}] n={}{}", i, members.size(),
                             KindName({members[i].method, members[i].format, test::Scales::kF16},
                                      members[i].group),
                             members[i].rows, cols, n, n == 1 ? std::string(" ") + kind : ""),
                 Down<float>(*gpu, o.dy[i], want.size()), want,
                 n > 8            ? kBf16Bound
                 : kind[0] == 'm' ? kMatVecMmaBound
                                  : kFp32Bound);
        }
      }
    }
  }
}

// The 1-token q4 / q2 products on the tensor cores (the default 4- and 2-bit files' decode
// kernel): alone and as a q/k/v-like group (each member its own codebook), groups 32 to 256, fp16
// and e8 scales, partial 16-row tiles, blocks of several tiles and more tiles than one block may
// hold (1,600 rows), bias; within kMatVecMmaBound of the oracle and NOT equal to the fp32 row
// kernel (so the tensor-core path is the one that ran).
TEST_P(CudaConformance, PackedMatVecOnTheTensorCores) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  using quant::CodeFormat;
  using quant::QuantMethod;
  struct S {
    CodeFormat format;
    std::vector<int64_t> rows;
    int64_t cols, group;
    test::Scales scales;
  };
  constexpr CodeFormat kQ4 = CodeFormat::kQ4, kQ2 = CodeFormat::kQ2;
  std::vector<S> shapes = {{kQ4, {37}, 640, 128, test::Scales::kE8},
                           {kQ4, {1}, 128, 128, test::Scales::kF16},
                           {kQ4, {300}, 512, 256, test::Scales::kF16},
                           {kQ4, {1600}, 128, 128, test::Scales::kE8},
                           {kQ4, {96, 32, 33}, 1024, 128, test::Scales::kE8},
                           {kQ4, {64, 48}, 256, 32, test::Scales::kF16},
                           {kQ4, {45}, 384, 64, test::Scales::kE8},
                           {kQ2, {37}, 640, 64, test::Scales::kE8},
                           {kQ2, {17, 40}, 256, 32, test::Scales::kF16},
                           {kQ2, {300}, 512, 128, test::Scales::kF16}};
  if (!Emulated()) {
    shapes.push_back({kQ4, {4096, 1024, 1024}, 4096, 128, test::Scales::kE8});
    shapes.push_back({kQ2, {14336, 14336}, 4096, 64, test::Scales::kE8});
  }
  uint32_t seed = 700;
  for (const S& sh : shapes) {
    std::vector<test::Owned> host;
    std::vector<DevicePacked> dev;
    for (int64_t r : sh.rows) {
      host.push_back(test::RandomPacked(QuantMethod::kCodebook, sh.format, r, sh.cols, sh.group,
                                        ++seed, sh.scales));
      dev.push_back(ToDevice(*gpu, host.back()));
    }
    const auto x = Random(sh.cols, seed + 1, 3.0f);
    const auto bias = Random(sh.rows[0], seed + 2);
    auto dx = Up(*gpu, x);
    auto db = Up(*gpu, bias);
    std::vector<std::vector<float>> got[2];  // [rows kernel, mma kernel][member]
    for (int k = 0; k < 2; ++k) {
      setenv("TURBOQUANT_CUDA_MATVEC", k == 0 ? "rows" : "mma", 1);
      const GroupOutputs o = MakeGroupOutputs(*gpu, dev, 1, db.as<float>(), 0);
      if (o.outs.size() == 1)
        gpu->PackedMatMul(dx.as<float>(), 1, dev[0].view, db.as<float>(), o.dy[0].as<float>());
      else
        gpu->PackedMatMulGroup(dx.as<float>(), 1, o.outs);
      unsetenv("TURBOQUANT_CUDA_MATVEC");
      for (size_t i = 0; i < host.size(); ++i)
        got[k].push_back(Down<float>(*gpu, o.dy[i], size_t(sh.rows[i])));
    }
    for (size_t i = 0; i < host.size(); ++i) {
      std::vector<float> want(size_t(sh.rows[i]));
      ref::PackedMatMul(x.data(), 1, host[i].view, i == 0 ? bias.data() : nullptr, want.data());
      const std::string what =
          fmt::format("{} of {}: {} g{} {} [{}, {}]", i, host.size(), quant::Traits(sh.format).name,
                      sh.group, sh.scales == test::Scales::kE8 ? "e8" : "f16", sh.rows[i], sh.cols);
      Expect("PackedMatVec mma", what, got[1][i], want, kMatVecMmaBound);
      EXPECT_NE(got[0][i], got[1][i]) << what
                                      << ": equal to the fp32 row kernel's result, so the "
                                         "tensor-core kernel did not run";
    }
  }
}

// RotatedPackedMatMulGroup: products over R x with x not yet rotated. One token through q4 / q2
// rows with a power-of-two rotation block runs the rotation inside the tensor-core kernel (one
// launch); other shapes (three tokens, q3) take the default (rotate, then the group). Against the
// oracle's rotation and product, and x left as it was; a 12 · 64 block (imports) at the end.
TEST_P(CudaConformance, RotatedPackedMatMulGroup) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  using quant::CodeFormat;
  using quant::QuantMethod;
  struct S {
    CodeFormat format;
    std::vector<int64_t> rows;
    int64_t cols, group, n;
  };
  std::vector<S> shapes = {{CodeFormat::kQ4, {37}, 640, 128, 1},  // block 128
                           {CodeFormat::kQ4, {96, 32, 33}, 1024, 128, 1},
                           {CodeFormat::kQ2, {37, 20}, 512, 64, 1},
                           {CodeFormat::kQ4, {40}, 4096, 128, 1},     // block 4096
                           {CodeFormat::kQ4, {12}, 8192, 128, 1},     // rotated first (wide)
                           {CodeFormat::kQ4, {30, 10}, 512, 128, 3},  // three tokens
                           {CodeFormat::kQ3, {25}, 256, 64, 1}};
  uint32_t seed = 900;
  for (const S& sh : shapes) {
    const auto rot = quant::HadamardRotation::Make(sh.cols, seed, 4096);
    std::vector<int8_t> signs(rot.signs().data(), rot.signs().data() + sh.cols);
    auto ds = Up(*gpu, signs);
    const RotationView view{ds.as<int8_t>(), sh.cols, rot.block()};
    std::vector<test::Owned> host;
    std::vector<DevicePacked> dev;
    for (int64_t r : sh.rows) {
      host.push_back(test::RandomPacked(QuantMethod::kCodebook, sh.format, r, sh.cols, sh.group,
                                        ++seed, test::Scales::kE8));
      dev.push_back(ToDevice(*gpu, host.back()));
    }
    const auto x = Random(sh.n * sh.cols, seed + 1, 2.0f);
    std::vector<float> xr(x);
    for (int64_t t = 0; t < sh.n; ++t) rot.Forward(xr.data() + t * sh.cols);
    const auto bias = Random(sh.rows[0], seed + 2);
    auto dx = Up(*gpu, x);
    auto db = Up(*gpu, bias);
    const GroupOutputs o = MakeGroupOutputs(*gpu, dev, sh.n, db.as<float>(), 0);
    gpu->RotatedPackedMatMulGroup(view, dx.as<float>(), sh.n, o.outs);
    for (size_t i = 0; i < host.size(); ++i) {
      std::vector<float> want(size_t(sh.n * sh.rows[i]));
      ref::PackedMatMul(xr.data(), sh.n, host[i].view, i == 0 ? bias.data() : nullptr, want.data());
      Expect("RotatedPackedMatMulGroup",
             fmt::format("{} of {}: {} g{} [{}, {}] block {} n={}", i, host.size(),
                         quant::Traits(sh.format).name, sh.group, sh.rows[i], sh.cols, rot.block(),
                         sh.n),
             Down<float>(*gpu, o.dy[i], want.size()), want, kMatVecMmaBound);
    }
    ExpectExact("RotatedPackedMatMulGroup", fmt::format("x unchanged, cols {}", sh.cols),
                Down<float>(*gpu, dx, x.size()) == x);
  }
  // A 12 · 64 block (imports): rotated by the rotation kernel, then the tensor-core product.
  const quant::HadamardRotation rot(quant::HadamardSigns::Generate(768, 5), 768);
  const test::Owned o =
      test::RandomPacked(QuantMethod::kCodebook, CodeFormat::kQ4, 24, 768, 128, 1);
  DevicePacked d = ToDevice(*gpu, o);
  std::vector<int8_t> signs(rot.signs().data(), rot.signs().data() + 768);
  auto ds = Up(*gpu, signs);
  const auto x = Random(768, 6);
  std::vector<float> xr(x), want(24);
  rot.Forward(xr.data());
  ref::PackedMatMul(xr.data(), 1, o.view, nullptr, want.data());
  auto dx = Up(*gpu, x);
  auto dy = Poisoned<float>(*gpu, 24);
  const PackedMatMulOutput out{&d.view, nullptr, dy.as<float>()};
  gpu->RotatedPackedMatMulGroup({ds.as<int8_t>(), 768, 768}, dx.as<float>(), 1, {&out, 1});
  Expect("RotatedPackedMatMulGroup", "q4 g128 [24, 768] block 768 = 12 · 64 n=1",
         Down<float>(*gpu, dy, 24), want, kMatVecMmaBound);
}

// The many-token product in each TURBOQUANT_CUDA_GEMM mode (a fresh backend per mode): exact keeps
// the fp32-class kernels, bf16 rounds x once, bf16x2 splits x into two bf16 GEMMs; a packed q4
// matrix (dequantized in chunks: 8,300 rows of 8,192 columns are two) and a dense bf16 one.
TEST_P(CudaConformance, TensorCoreGemmModes) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct Env {
    explicit Env(const char* v) { setenv("TURBOQUANT_CUDA_GEMM", v, 1); }
    ~Env() { unsetenv("TURBOQUANT_CUDA_GEMM"); }
  };
  {
    Env bad("fast");
    EXPECT_THROW(test::FreshBackend(GetParam()), Error);
  }
  struct Mode {
    const char* name;
    double packed, dense;
  };
  for (const Mode m :
       {Mode{"exact", kTensorCoreBound, kFp32Bound}, Mode{"bf16", kBf16Bound, kBf16Bound},
        Mode{"bf16x2", kBf16Bound, kTensorCoreBound}}) {
    Env env(m.name);
    auto b = test::FreshBackend(GetParam());
    ASSERT_NE(b, nullptr);
    struct S {
      int64_t n, rows, cols;
    };
    for (const S s : {S{9, 37, 640}, S{40, 8300, 8192}}) {
      if (Emulated() && s.rows > 100) continue;  // minutes of fibers; GPU only
      const test::Owned o = test::RandomPacked(quant::QuantMethod::kCodebook,
                                               quant::CodeFormat::kQ4, s.rows, s.cols, 64, 7);
      DevicePacked d = ToDevice(*b, o);
      const auto x = Random(s.n * s.cols, 8);
      const auto bias = Random(s.rows, 9);
      std::vector<float> want(size_t(s.n * s.rows));
      ref::PackedMatMul(x.data(), s.n, o.view, bias.data(), want.data());
      auto dx = Up(*b, x), db = Up(*b, bias);
      auto dy = Poisoned<float>(*b, want.size());
      b->PackedMatMul(dx.as<float>(), s.n, d.view, db.as<float>(), dy.as<float>());
      Expect("GemmMode " + std::string(m.name),
             fmt::format("q4 g64 [{}, {}] n={} bias", s.rows, s.cols, s.n),
             Down<float>(*b, dy, want.size()), want, m.packed);
    }
    const int64_t n = 33, out = 131, in = 300;
    const auto x = Random(n * in, 10);
    const auto wb = ToBytes(Random(out * in, 11, 0.05f), DType::BF16);
    std::vector<float> want(size_t(n * out));
    RefBackend().MatMul(x.data(), n, TensorView{wb.data(), DType::BF16, {out, in}}, nullptr,
                        want.data());
    auto dx = Up(*b, x), dw = Up(*b, wb);
    auto dy = Poisoned<float>(*b, want.size());
    b->MatMul(dx.as<float>(), n, TensorView{dw.data(), DType::BF16, {out, in}}, nullptr,
              dy.as<float>());
    Expect("GemmMode " + std::string(m.name), fmt::format("bf16 [{}, {}] n={}", out, in, n),
           Down<float>(*b, dy, want.size()), want, m.dense);
  }
}

TEST_P(CudaConformance, PackedMatMulRejectsBadViews) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  const test::Owned o =
      test::RandomPacked(quant::QuantMethod::kCodebook, quant::CodeFormat::kQ4, 4, 64, 32, 1);
  DevicePacked d = ToDevice(*gpu, o);
  auto x = gpu->Allocate(64 * 4, "x"), y = gpu->Allocate(4 * 4, "y");
  PackedMatrix v = d.view;
  v.row_bytes += 1;
  EXPECT_THROW(gpu->PackedMatMul(x.as<float>(), 1, v, nullptr, y.as<float>()), Error);
  v = d.view;
  v.codebook = nullptr;
  EXPECT_THROW(gpu->PackedMatMul(x.as<float>(), 1, v, nullptr, y.as<float>()), Error);
  v = d.view;
  v.group_size = 48;
  EXPECT_THROW(gpu->PackedEmbedRows(v, nullptr, 1, y.as<float>()), Error);
}

TEST_P(CudaConformance, PackedEmbedRows) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (const PackedKind& k : AllPackedKinds()) {
    for (int64_t g : {16, 64}) {
      const int64_t rows = 50, cols = 352 - (352 % g);
      const test::Owned o = test::RandomPacked(k.method, k.format, rows, cols, g, 9, k.scales);
      DevicePacked d = ToDevice(*gpu, o);
      const std::vector<int32_t> ids = {0, 49, 7, 7, 31};
      std::vector<float> want(ids.size() * size_t(cols));
      for (size_t i = 0; i < ids.size(); ++i)
        ref::PackedDequantizeRows(o.view, ids[i], 1, want.data() + i * size_t(cols));
      auto did = Up(*gpu, ids);
      auto dy = Poisoned<float>(*gpu, want.size());
      gpu->PackedEmbedRows(d.view, did.as<int32_t>(), int64_t(ids.size()), dy.as<float>());
      ExpectExact("PackedEmbedRows", fmt::format("{} [{}, {}]", KindName(k, g), rows, cols),
                  Down<float>(*gpu, dy, want.size()) == want);
    }
  }
  // A token id outside the table is an error at the next sync, naming the id.
  const test::Owned o =
      test::RandomPacked(quant::QuantMethod::kCodebook, quant::CodeFormat::kQ4, 8, 64, 32, 1);
  DevicePacked d = ToDevice(*gpu, o);
  auto did = Up(*gpu, std::vector<int32_t>{3, 8});
  auto dy = gpu->Allocate(2 * 64 * 4, "y");
  gpu->PackedEmbedRows(d.view, did.as<int32_t>(), 2, dy.as<float>());
  try {
    gpu->Synchronize();
    ADD_FAILURE() << "no error for token id 8 of 8 rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 8"), std::string::npos) << e.what();
  }
  gpu->Synchronize();  // the error is reported once
}

// --- embeddings, elementwise, norms, RoPE, rotation -----------------------------------------

TEST_P(CudaConformance, EmbedRows) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t vocab = 301, dim = 77;
    const auto table = Random(vocab * dim, 4);
    const auto tb = ToBytes(table, dt);
    const std::vector<int32_t> ids = {0, 300, 5, 5, 123, 1, 299, 42, 7};
    std::vector<float> want;
    for (int32_t id : ids) {
      std::vector<float> row(static_cast<size_t>(dim));
      ToF32(TensorView{tb.data(), dt, {vocab, dim}}, int64_t(id) * dim, dim, row.data());
      want.insert(want.end(), row.begin(), row.end());
    }
    auto dt_ = Up(*gpu, tb), did = Up(*gpu, ids);
    auto dy = Poisoned<float>(*gpu, want.size());
    gpu->EmbedRows(TensorView{dt_.data(), dt, {vocab, dim}}, did.as<int32_t>(), int64_t(ids.size()),
                   dy.as<float>());
    ExpectExact("EmbedRows",
                fmt::format("{} vocab={} dim={} n={}", Name(dt), vocab, dim, ids.size()),
                Down<float>(*gpu, dy, want.size()) == want);
    // A negative id is reported at the next sync point.
    auto bad = Up(*gpu, std::vector<int32_t>{-1});
    gpu->EmbedRows(TensorView{dt_.data(), dt, {vocab, dim}}, bad.as<int32_t>(), 1, dy.as<float>());
    EXPECT_THROW(gpu->Synchronize(), Error);
  }
}

TEST_P(CudaConformance, AddSiluMulRmsNorm) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (int64_t n : {1, 31, 257 * 77}) {
    const auto a = Random(n, 1), b = Random(n, 2);
    std::vector<float> sum(a), silu(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += b[size_t(i)];
    RefBackend().SiluMul(a.data(), b.data(), n, silu.data());
    auto da = Up(*gpu, a), db = Up(*gpu, b);
    auto dy = Poisoned<float>(*gpu, size_t(n));
    gpu->SiluMul(da.as<float>(), db.as<float>(), n, dy.as<float>());
    Expect("SiluMul", fmt::format("n={}", n), Down<float>(*gpu, dy, size_t(n)), silu, kFp32Bound);
    gpu->Add(da.as<float>(), db.as<float>(), n);
    ExpectExact("Add", fmt::format("n={}", n), Down<float>(*gpu, da, size_t(n)) == sum);
  }
  for (int64_t rows : {1, 9, 257}) {
    for (int64_t dim : {10, 77, 4096}) {
      if (Emulated() && rows * dim > 100000) continue;
      const auto x = Random(rows * dim, 6, 3.0f), w = Random(dim, 7);
      std::vector<float> want(x.size());
      RefBackend().RmsNorm(x.data(), rows, dim, w.data(), 1e-5f, want.data());
      auto dx = Up(*gpu, x), dw = Up(*gpu, w);
      auto dy = Poisoned<float>(*gpu, x.size());
      gpu->RmsNorm(dx.as<float>(), rows, dim, dw.as<float>(), 1e-5f, dy.as<float>());
      Expect("RmsNorm", fmt::format("rows={} dim={}", rows, dim), Down<float>(*gpu, dy, x.size()),
             want, kFp32Bound);
      gpu->RmsNorm(dx.as<float>(), rows, dim, dw.as<float>(), 1e-5f, dx.as<float>());  // in place
      Expect("RmsNorm", fmt::format("rows={} dim={} in place", rows, dim),
             Down<float>(*gpu, dx, x.size()), want, kFp32Bound);
      // The residual add fused with the norm: x += r (bit-exact, as Add), out = RmsNorm(x).
      const auto r = Random(rows * dim, 8, 3.0f);
      std::vector<float> sum(x), want_sum(x.size());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += r[i];
      RefBackend().RmsNorm(sum.data(), rows, dim, w.data(), 1e-5f, want_sum.data());
      auto dx2 = Up(*gpu, x), dr = Up(*gpu, r);
      auto dy2 = Poisoned<float>(*gpu, x.size());
      gpu->AddRmsNorm(dx2.as<float>(), dr.as<float>(), rows, dim, dw.as<float>(), 1e-5f,
                      dy2.as<float>());
      ExpectExact("AddRmsNorm x", fmt::format("rows={} dim={}", rows, dim),
                  Down<float>(*gpu, dx2, x.size()) == sum);
      Expect("AddRmsNorm", fmt::format("rows={} dim={}", rows, dim),
             Down<float>(*gpu, dy2, x.size()), want_sum, kFp32Bound);
    }
  }
}

TEST_P(CudaConformance, Rope) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct S {
    int64_t rows, heads, hd;
    float attn_factor;
  };
  for (const S s :
       {S{5, 3, 10, 1.1f}, S{1, 32, 128, 1.0f}, S{257, 8, 64, 1.0f}, S{9, 2, 96, 0.9f}}) {
    const auto x = Random(s.rows * s.heads * s.hd, 8);
    std::vector<float> inv_freq(static_cast<size_t>(s.hd / 2));
    for (int64_t i = 0; i < s.hd / 2; ++i)
      inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(s.hd));
    std::vector<int64_t> pos(size_t(s.rows));
    for (int64_t r = 0; r < s.rows; ++r) pos[size_t(r)] = (r * 7919) % 131072;
    std::vector<float> want(x);
    RefBackend().Rope(want.data(), s.rows, s.heads, s.hd, pos.data(), inv_freq.data(),
                      s.attn_factor);
    auto dx = Up(*gpu, x), dp = Up(*gpu, pos), df = Up(*gpu, inv_freq);
    gpu->Rope(dx.as<float>(), s.rows, s.heads, s.hd, dp.as<int64_t>(), df.as<float>(),
              s.attn_factor);
    Expect(
        "Rope",
        fmt::format("rows={} heads={} head_dim={} factor={}", s.rows, s.heads, s.hd, s.attn_factor),
        Down<float>(*gpu, dx, x.size()), want, kFp32Bound);
  }
  EXPECT_THROW(gpu->Rope(nullptr, 1, 1, 7, nullptr, nullptr, 1.0f), Error);
}

TEST_P(CudaConformance, Rotate) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct S {
    int64_t dim, max_block, rows;
  };
  // max_block < 0: the block is -max_block, m · 2^k (turboquant-mlx imports: 12, 20, 28).
  for (const S s :
       {S{64, 64, 1}, S{96, 4096, 9}, S{4096, 4096, 3}, S{14336, 4096, 2}, S{18944, 4096, 1},
        S{1408, 4096, 257}, S{8192, 4096, 2}, S{256, 16, 5}, S{1536, -768, 3}, S{2560, -1280, 2},
        S{3584, -3584, 2}, S{336, -28, 4}, S{4608, -1536, 1}}) {
    if (Emulated() && s.rows * s.dim > 100000) continue;
    const quant::HadamardRotation rot =
        s.max_block < 0
            ? quant::HadamardRotation(quant::HadamardSigns::Generate(s.dim, 77), -s.max_block)
            : quant::HadamardRotation::Make(s.dim, 77, s.max_block);
    const auto x = Random(s.rows * s.dim, 9);
    std::vector<float> want(x);
    for (int64_t r = 0; r < s.rows; ++r) rot.Forward(want.data() + r * s.dim);
    std::vector<int8_t> signs(rot.signs().data(), rot.signs().data() + s.dim);
    auto ds = Up(*gpu, signs), dx = Up(*gpu, x);
    auto dy = Poisoned<float>(*gpu, x.size());
    const RotationView view{ds.as<int8_t>(), s.dim, rot.block()};
    gpu->Rotate(view, dx.as<float>(), s.rows, dy.as<float>());
    const std::string what = fmt::format("dim={} block={} rows={}", s.dim, rot.block(), s.rows);
    Expect("Rotate", what, Down<float>(*gpu, dy, x.size()), want, kFp32Bound);
    gpu->Rotate(view, dx.as<float>(), s.rows, dx.as<float>());  // in place
    Expect("Rotate", what + " in place", Down<float>(*gpu, dx, x.size()), want, kFp32Bound);
  }
  auto ds = gpu->Allocate(96, "signs");
  EXPECT_THROW(gpu->Rotate({ds.as<int8_t>(), 96, 64}, nullptr, 1, nullptr), Error);  // 64 ∤ 96
  EXPECT_THROW(gpu->Rotate({ds.as<int8_t>(), 96, 3}, nullptr, 1, nullptr), Error);
  EXPECT_THROW(gpu->Rotate({ds.as<int8_t>(), 72, 72}, nullptr, 1, nullptr), Error);  // 9 · 8
  EXPECT_THROW(gpu->Rotate({ds.as<int8_t>(), 8192, 8192}, nullptr, 1, nullptr), Error);
}

// --- attention on a plain cache, KV store ---------------------------------------------------

TEST_P(CudaConformance, Attention) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct S {
    int64_t n, pos0, heads, kv_heads, hd, window;
  };
  // The split kernel (head_dim 64/128/256, <= 8 heads a group): llama's 32/8 x 128 decode
  // step, rows of different lengths across splits (4 rows at 300), a window inside the splits.
  const S shapes[] = {{1, 0, 4, 4, 64, 0},
                      {1, 40, 8, 2, 64, 0},
                      {7, 0, 4, 1, 80, 0},
                      {5, 100, 6, 3, 96, 16},
                      {257, 0, 4, 2, 64, 0},
                      {3, 60, 2, 2, 128, 8},
                      {1, 4095, 8, 8, 128, 0},
                      {2, 30, 4, 2, 256, 0},
                      {1, 32767, 4, 1, 64, 0},
                      {1, 32767, 4, 1, 64, 4096},
                      {1, 511, 32, 8, 128, 0},
                      {4, 300, 8, 2, 64, 0},
                      {3, 200, 8, 2, 128, 50},
                      {2, 77, 16, 1, 64, 0},
                      // The prefill kernel (>= 16 rows, head_dim 64/128): a short tile, a chunk
                      // after earlier positions, windows inside and across the 64-position
                      // tiles, an 8B-shaped 512-token prompt.
                      {16, 0, 4, 2, 128, 0},
                      {40, 10, 4, 4, 64, 0},
                      {20, 30, 2, 1, 128, 7},
                      {130, 0, 8, 2, 128, 33},
                      {200, 500, 4, 1, 64, 100},
                      {512, 0, 32, 8, 128, 0}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (const S& s : shapes) {
      if (s.pos0 > 5000 && dt != DType::F16) continue;  // the 32K cache once, in fp16
      if (Emulated() && (s.n * (s.pos0 + s.n) * s.heads > 20000 || s.heads >= 32)) continue;
      const int64_t cap = s.pos0 + s.n + 3, stride = cap * s.hd;
      const auto q = Random(s.n * s.heads * s.hd, 10);
      const auto k = ToBytes(Random(s.kv_heads * stride, 11), dt);
      const auto v = ToBytes(Random(s.kv_heads * stride, 12), dt);
      AttentionParams p{s.heads, s.kv_heads, s.hd, 1.0f / std::sqrt(float(s.hd)), s.window};
      std::vector<float> want(q.size());
      RefBackend().Attention(q.data(), s.n, s.pos0, KvView{k.data(), v.data(), dt, stride}, p,
                             want.data());
      auto dq = Up(*gpu, q), dk = Up(*gpu, k), dv = Up(*gpu, v);
      auto dy = Poisoned<float>(*gpu, q.size());
      gpu->Attention(dq.as<float>(), s.n, s.pos0, KvView{dk.data(), dv.data(), dt, stride}, p,
                     dy.as<float>());
      Expect("Attention",
             fmt::format("{} n={} pos0={} heads={}/{} hd={} window={}", Name(dt), s.n, s.pos0,
                         s.heads, s.kv_heads, s.hd, s.window),
             Down<float>(*gpu, dy, q.size()), want, kAttentionBound);
    }
  }
  AttentionParams bad{6, 4, 64, 1.0f, 0};  // 4 ∤ 6
  EXPECT_THROW(gpu->Attention(nullptr, 1, 0, KvView{}, bad, nullptr), Error);
}

TEST_P(CudaConformance, KvStore) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t heads = 3, hd = 80, slots = 40, n = 9, slot0 = 30;
    const auto src = Random(n * heads * hd, 13);
    std::vector<uint8_t> cache(size_t(heads * slots * hd) * DTypeSize(dt), 0x5a);
    auto dc = Up(*gpu, cache), ds = Up(*gpu, src);
    gpu->KvStore(ds.as<float>(), n, heads, hd, dc.data(), dt, slots * hd, slot0);
    const size_t es = DTypeSize(dt);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<float> one(src.begin() + (t * heads + h) * hd,
                               src.begin() + (t * heads + h + 1) * hd);
        const auto b = ToBytes(one, dt);
        std::memcpy(cache.data() + size_t((h * slots + slot0 + t) * hd) * es, b.data(), b.size());
      }
    ExpectExact("KvStore",
                fmt::format("{} n={} heads={} hd={} slot0={}", Name(dt), n, heads, hd, slot0),
                Down<uint8_t>(*gpu, dc, cache.size()) == cache);
  }
  EXPECT_THROW(gpu->KvStore(nullptr, 5, 2, 8, nullptr, DType::F16, 32, 0), Error);  // 5 * 8 > 32
  EXPECT_THROW(gpu->KvStore(nullptr, 1, 1, 8, nullptr, DType::I32, 8, 0), Error);
}

// --- MoE routing, gather / scatter, argmax, copy --------------------------------------------

TEST_P(CudaConformance, MoeRoute) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct S {
    int64_t n, experts, top_k;
    bool renorm;
  };
  for (const S s : {S{1, 8, 2, true}, S{9, 60, 4, false}, S{257, 128, 8, true}, S{3, 5, 5, true}}) {
    auto logits = Random(s.n * s.experts, 14, 2.0f);
    if (s.experts >= 8) logits[3] = logits[5];  // a tie: the lower id first
    std::vector<int32_t> want_ids(size_t(s.n * s.top_k));
    std::vector<float> want_w(want_ids.size());
    RefBackend().MoeRoute(logits.data(), s.n, MoeRouting{s.experts, s.top_k, s.renorm},
                          want_ids.data(), want_w.data());
    auto dl = Up(*gpu, logits);
    auto dc = Poisoned<int32_t>(*gpu, want_ids.size());
    auto dw = Poisoned<float>(*gpu, want_w.size());
    gpu->MoeRoute(dl.as<float>(), s.n, MoeRouting{s.experts, s.top_k, s.renorm}, dc.as<int32_t>(),
                  dw.as<float>());
    const std::string what = fmt::format("n={} experts={} top_k={}{}", s.n, s.experts, s.top_k,
                                         s.renorm ? " renormalized" : "");
    ExpectExact("MoeRoute ids", what, Down<int32_t>(*gpu, dc, want_ids.size()) == want_ids);
    Expect("MoeRoute weights", what, Down<float>(*gpu, dw, want_w.size()), want_w, 1e-12);
  }
  EXPECT_THROW(gpu->MoeRoute(nullptr, 1, MoeRouting{4, 5, true}, nullptr, nullptr), Error);
}

TEST_P(CudaConformance, GatherScatterArgmaxCopy) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  const int64_t rows = 20, dim = 77;
  const auto src = Random(rows * dim, 15);
  const std::vector<int32_t> idx = {3, 19, 0, 3, 3, 7, 12, 19, 1};
  const auto wts = Random(int64_t(idx.size()), 16);
  auto dsrc = Up(*gpu, src), didx = Up(*gpu, idx), dwts = Up(*gpu, wts);
  {  // gather
    std::vector<float> want;
    for (int32_t r : idx)
      want.insert(want.end(), src.begin() + r * dim, src.begin() + (r + 1) * dim);
    auto dy = Poisoned<float>(*gpu, want.size());
    gpu->GatherRows(dsrc.as<float>(), didx.as<int32_t>(), int64_t(idx.size()), dim, dy.as<float>());
    ExpectExact("GatherRows", fmt::format("count={} dim={}", idx.size(), dim),
                Down<float>(*gpu, dy, want.size()) == want);
  }
  {  // ordered scatter-add, rows repeating
    const auto y0 = Random(rows * dim, 17);
    const auto part = Random(int64_t(idx.size()) * dim, 18);
    std::vector<float> want(y0);
    for (size_t i = 0; i < idx.size(); ++i)
      for (int64_t c = 0; c < dim; ++c)
        want[size_t(idx[i] * dim + c)] += wts[i] * part[i * size_t(dim) + size_t(c)];
    auto dy = Up(*gpu, y0), dp = Up(*gpu, part);
    gpu->ScatterAddRows(dp.as<float>(), didx.as<int32_t>(), dwts.as<float>(), int64_t(idx.size()),
                        dim, dy.as<float>());
    Expect("ScatterAddRows", fmt::format("count={} dim={} repeated rows", idx.size(), dim),
           Down<float>(*gpu, dy, want.size()), want, 1e-13);
  }
  for (int64_t n : {1, 77, 32000, 151936}) {  // argmax, with a tie
    const int64_t r = 3;
    auto x = Random(r * n, uint64_t(n));
    std::vector<int32_t> want;
    for (int64_t i = 0; i < r; ++i) {
      float* row = x.data() + i * n;
      const int64_t best = std::max_element(row, row + n) - row;
      if (n > 2) row[n - 1] = row[best];  // a later tie: the first index wins
      want.push_back(int32_t(best));
    }
    auto dx = Up(*gpu, x);
    auto dy = Poisoned<int32_t>(*gpu, size_t(r));
    gpu->Argmax(dx.as<float>(), r, n, dy.as<int32_t>());
    ExpectExact("Argmax", fmt::format("rows={} n={} tie", r, n),
                Down<int32_t>(*gpu, dy, size_t(r)) == want);
  }
  {  // copy with memmove semantics, overlapping both ways
    std::vector<float> buf(1000);
    std::iota(buf.begin(), buf.end(), 0.0f);
    auto db = Up(*gpu, buf);
    gpu->Copy(db.as<float>() + 10, db.as<float>(), 500 * 4);         // forward overlap
    gpu->Copy(db.as<float>() + 600, db.as<float>() + 700, 300 * 4);  // backward overlap
    std::vector<float> want(buf);
    std::memmove(want.data() + 10, want.data(), 500 * 4);
    std::memmove(want.data() + 600, want.data() + 700, 300 * 4);
    ExpectExact("Copy", "overlapping ranges", Down<float>(*gpu, db, buf.size()) == want);
  }
}

// --- memory ---------------------------------------------------------------------------------

TEST_P(CudaConformance, MemoryAndScratch) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  EXPECT_EQ(gpu->memory_space(), MemorySpace::kDevice);
  size_t free_b = 0, total_b = 0;
  gpu->MemoryInfo(&free_b, &total_b);
  EXPECT_GT(total_b, size_t(0));
  EXPECT_LE(free_b, total_b);
  // Out of memory names what did not fit and its size; nothing is left allocated.
  try {
    gpu->Allocate(total_b * 2, "the test's huge buffer");
    ADD_FAILURE() << "allocating twice the device memory succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the test's huge buffer"), std::string::npos) << m;
    EXPECT_NE(m.find("out of device memory"), std::string::npos) << m;
  }
  std::vector<float> h(1000, 2.5f), back(1000);
  auto d = gpu->Allocate(h.size() * 4, "round trip");
  gpu->CopyToDevice(d.data(), h.data(), h.size() * 4);
  gpu->Download(back.data(), d.data(), back.size() * 4);
  EXPECT_EQ(h, back);
  // The rotation scratch keeps its address while it is large enough.
  float* a = gpu->RotationScratch(4096);
  EXPECT_EQ(gpu->RotationScratch(100), a);
  EXPECT_NE(gpu->RotationScratch(1 << 20), nullptr);
  for (int op = 0; op < int(Op::kCount); ++op) EXPECT_TRUE(gpu->Supports(Op(op))) << op;
  EXPECT_NE(gpu->Describe().find("cuda:0"), std::string::npos);
}

}  // namespace
}  // namespace tq::kernels
