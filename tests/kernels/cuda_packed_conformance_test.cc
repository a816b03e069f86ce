// The CUDA backend's packed products and packed embeddings against the scalar oracle
// (ref::PackedMatMul, quant's rotation): every code format × scale format × group size on awkward
// shapes, one token through each TURBOQUANT_CUDA_MATVEC kernel, groups, the tensor-core one-token
// kernel and its in-kernel rotation, the GEMM modes of prompts. The fixture, bounds and helpers are
// cuda_conformance.h's; the suite is instantiated in cuda_conformance_test.cc.
#include "cuda_conformance.h"
#include "kernels/grouped_matmul.h"

namespace tq::kernels {
namespace {

using namespace conformance;

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

// A group's matrices: random on the host (the oracle reads them) and their copies on the device.
struct PackedGroup {
  std::vector<test::Owned> host;
  std::vector<DevicePacked> dev;
  void Add(Backend& gpu, quant::QuantMethod method, quant::CodeFormat format, int64_t rows,
           int64_t cols, int64_t group, uint32_t seed, test::Scales scales) {
    host.push_back(test::RandomPacked(method, format, rows, cols, group, seed, scales));
    dev.push_back(ToDevice(gpu, host.back()));
  }
  size_t size() const { return host.size(); }
  // The oracle's product [n, rows] of member i over x [n, cols] (+ bias when given).
  std::vector<float> Want(size_t i, const float* x, int64_t n, const float* bias) const {
    std::vector<float> want(size_t(n * host[i].view.rows));
    ref::PackedMatMul(x, n, host[i].view, bias, want.data());
    return want;
  }
};

struct PackedKind {
  quant::QuantMethod method;
  quant::CodeFormat format;
  test::Scales scales;
  bool linear = false;  // q8 with convert's linear codebook (linear_q8_step set)
};
std::vector<PackedKind> AllPackedKinds() {
  using quant::CodeFormat;
  std::vector<PackedKind> k;
  for (CodeFormat f : {CodeFormat::kQ1, CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4,
                       CodeFormat::kQ8, CodeFormat::kTernary})
    for (test::Scales s : {test::Scales::kF16, test::Scales::kE8})
      k.push_back({quant::QuantMethod::kCodebook, f, s});
  for (test::Scales s : {test::Scales::kF16, test::Scales::kE8})
    k.push_back({quant::QuantMethod::kCodebook, CodeFormat::kQ8, s, true});
  for (CodeFormat f : {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8})
    k.push_back({quant::QuantMethod::kAffine, f, test::Scales::kF16});
  return k;
}
std::string KindName(const PackedKind& k, int64_t g) {
  return fmt::format("{}{} g{} {}", quant::Traits(k.format).name,
                     k.method == quant::QuantMethod::kAffine ? " affine"
                     : k.linear                              ? " linear"
                                                             : "",
                     g, k.scales == test::Scales::kE8 ? "e8" : "f16");
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
        test::Owned o = test::RandomPacked(k.method, k.format, s.rows, s.cols, g,
                                           uint32_t(s.rows + g), k.scales);
        if (k.linear) test::UseLinearQ8Codebook(o);
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
    PackedGroup grp;
    for (const M& m : members)
      grp.Add(*gpu, m.method, m.format, m.rows, m.cols, m.group, ++seed, test::Scales::kF16);
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
        const GroupOutputs o = MakeGroupOutputs(*gpu, grp.dev, n, db.as<float>(), 1);
        setenv("TURBOQUANT_CUDA_MATVEC", kind, 1);
        gpu->PackedMatMulGroup(dx.as<float>(), n, o.outs);
        unsetenv("TURBOQUANT_CUDA_MATVEC");
        for (size_t i = 0; i < members.size(); ++i) {
          const std::vector<float> want = grp.Want(i, x.data(), n, i == 1 ? bias.data() : nullptr);
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
    PackedGroup grp;
    for (int64_t r : sh.rows)
      grp.Add(*gpu, QuantMethod::kCodebook, sh.format, r, sh.cols, sh.group, ++seed, sh.scales);
    const auto x = Random(sh.cols, seed + 1, 3.0f);
    const auto bias = Random(sh.rows[0], seed + 2);
    auto dx = Up(*gpu, x);
    auto db = Up(*gpu, bias);
    std::vector<std::vector<float>> got[2];  // [rows kernel, mma kernel][member]
    for (int k = 0; k < 2; ++k) {
      setenv("TURBOQUANT_CUDA_MATVEC", k == 0 ? "rows" : "mma", 1);
      const GroupOutputs o = MakeGroupOutputs(*gpu, grp.dev, 1, db.as<float>(), 0);
      if (o.outs.size() == 1)
        gpu->PackedMatMul(dx.as<float>(), 1, grp.dev[0].view, db.as<float>(), o.dy[0].as<float>());
      else
        gpu->PackedMatMulGroup(dx.as<float>(), 1, o.outs);
      unsetenv("TURBOQUANT_CUDA_MATVEC");
      for (size_t i = 0; i < grp.size(); ++i)
        got[k].push_back(Down<float>(*gpu, o.dy[i], size_t(sh.rows[i])));
    }
    for (size_t i = 0; i < grp.size(); ++i) {
      const std::vector<float> want = grp.Want(i, x.data(), 1, i == 0 ? bias.data() : nullptr);
      const std::string what =
          fmt::format("{} of {}: {} g{} {} [{}, {}]", i, grp.size(), quant::Traits(sh.format).name,
                      sh.group, sh.scales == test::Scales::kE8 ? "e8" : "f16", sh.rows[i], sh.cols);
      Expect("PackedMatVec mma", what, got[1][i], want, kMatVecMmaBound);
      EXPECT_NE(got[0][i], got[1][i]) << what
                                      << ": equal to the fp32 row kernel's result, so the "
                                         "tensor-core kernel did not run";
    }
  }
}

// GroupedMatMul on the device (a MoE layer's experts over one token): the packed items over one
// input run as PackedMatMulGroup launches of up to 4 members (10 here: 4 + 4 + 2), the items with
// inputs of their own one by one; each against the oracle.
TEST_P(CudaConformance, GroupedMatMulSharedInput) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  const int64_t cols = 256;
  PackedGroup grp;
  for (uint32_t e = 0; e < 12; ++e)
    grp.Add(*gpu, quant::QuantMethod::kCodebook,
            e % 3 ? quant::CodeFormat::kQ4 : quant::CodeFormat::kQ2, 32 + 16 * (e % 2), cols, 64,
            1200 + e, test::Scales::kE8);
  const auto x = Random(cols, 1300, 2.0f), x2 = Random(2 * cols, 1301, 2.0f);
  auto dx = Up(*gpu, x);
  auto dx2 = Up(*gpu, x2);
  std::vector<DeviceBuffer> dy;
  std::vector<GroupedMatMulItem> items;
  for (size_t i = 0; i < grp.size(); ++i) {
    const bool own = i >= 10;  // the last two: two rows of their own
    const int64_t rows = own ? 2 : 1;
    dy.push_back(Poisoned<float>(*gpu, size_t(rows * grp.dev[i].view.rows)));
    items.push_back({own ? dx2.as<float>() : dx.as<float>(),
                     rows,
                     &grp.dev[i].view,
                     nullptr,
                     dy.back().as<float>(),
                     {}});
  }
  GroupedMatMul(*gpu, items);
  for (size_t i = 0; i < grp.size(); ++i) {
    const bool own = i >= 10;
    const std::vector<float> want = grp.Want(i, own ? x2.data() : x.data(), own ? 2 : 1, nullptr);
    Expect("GroupedMatMul", fmt::format("item {} of {}{}", i, grp.size(), own ? " (own x)" : ""),
           Down<float>(*gpu, dy[i], want.size()), want, kMatVecMmaBound);
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
                           {CodeFormat::kQ4, {12}, 8192, 128, 1},     // x after the table
                           {CodeFormat::kQ4, {20}, 14336, 128, 1},    // block 2048 (8B down)
                           {CodeFormat::kQ4, {8}, 32768, 128, 1},     // rotated first (wide)
                           {CodeFormat::kQ4, {30, 10}, 512, 128, 3},  // three tokens
                           {CodeFormat::kQ3, {25}, 256, 64, 1}};
  uint32_t seed = 900;
  for (const S& sh : shapes) {
    const auto rot = quant::HadamardRotation::Make(sh.cols, seed, 4096);
    std::vector<int8_t> signs(rot.signs().data(), rot.signs().data() + sh.cols);
    auto ds = Up(*gpu, signs);
    const RotationView view{ds.as<int8_t>(), sh.cols, rot.block()};
    PackedGroup grp;
    for (int64_t r : sh.rows)
      grp.Add(*gpu, QuantMethod::kCodebook, sh.format, r, sh.cols, sh.group, ++seed,
              test::Scales::kE8);
    const auto x = Random(sh.n * sh.cols, seed + 1, 2.0f);
    std::vector<float> xr(x);
    for (int64_t t = 0; t < sh.n; ++t) rot.Forward(xr.data() + t * sh.cols);
    const auto bias = Random(sh.rows[0], seed + 2);
    auto dx = Up(*gpu, x);
    auto db = Up(*gpu, bias);
    const GroupOutputs o = MakeGroupOutputs(*gpu, grp.dev, sh.n, db.as<float>(), 0);
    gpu->RotatedPackedMatMulGroup(view, dx.as<float>(), sh.n, o.outs);
    for (size_t i = 0; i < grp.size(); ++i) {
      const std::vector<float> want = grp.Want(i, xr.data(), sh.n, i == 0 ? bias.data() : nullptr);
      Expect("RotatedPackedMatMulGroup",
             fmt::format("{} of {}: {} g{} [{}, {}] block {} n={}", i, grp.size(),
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
      test::Owned o = test::RandomPacked(k.method, k.format, rows, cols, g, 9, k.scales);
      if (k.linear) test::UseLinearQ8Codebook(o);
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

}  // namespace
}  // namespace tq::kernels
