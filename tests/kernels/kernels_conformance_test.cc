// Every cpu kernel against the scalar reference on random inputs of awkward shapes (DESIGN.md §6):
// 1 and 257 rows, dims that are not multiples of the vector width, every weight / KV dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa.h"
#include "packed_test_util.h"

namespace tq::kernels {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// A weight tensor in `dt` holding the rounded values of `src` (and those values back in fp32).
struct Weights {
  std::vector<uint8_t> bytes;
  TensorView view;
};
Weights MakeWeights(const std::vector<float>& src, int64_t out, int64_t in, DType dt) {
  Weights w;
  w.bytes.resize(src.size() * DTypeSize(dt));
  if (dt == DType::F32) {
    std::memcpy(w.bytes.data(), src.data(), w.bytes.size());
  } else if (dt == DType::F16) {
    F32ToF16(src.data(), reinterpret_cast<uint16_t*>(w.bytes.data()), src.size());
  } else {
    F32ToBf16(src.data(), reinterpret_cast<uint16_t*>(w.bytes.data()), src.size());
  }
  w.view = TensorView{w.bytes.data(), dt, {out, in}};
  return w;
}

double MaxRelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1e-6, err = 0;
  for (float x : b) scale = std::max(scale, double(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, double(std::fabs(a[i] - b[i])));
  return err / scale;
}

struct MatMulCase {
  int64_t n, out, in;
  DType dt;
  bool bias;
};

class MatMulConformance : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(MatMulConformance, CpuMatchesRef) {
  const MatMulCase c = GetParam();
  const auto x = Random(c.n * c.in, 1);
  const Weights w = MakeWeights(Random(c.out * c.in, 2, 0.05f), c.out, c.in, c.dt);
  const auto bias = Random(c.out, 3);
  std::vector<float> want(static_cast<size_t>(c.n * c.out)), got(want.size(), NAN);
  const float* b = c.bias ? bias.data() : nullptr;
  RefBackend().MatMul(x.data(), c.n, w.view, b, want.data());
  // Every ISA level this CPU has that picks its own GEMM kernel (avx2: the 8-wide one).
  std::vector<cpu::Isa> levels = {cpu::DetectedIsa()};
  if (cpu::DetectedIsa() > cpu::Isa::kAvx2) levels.push_back(cpu::Isa::kAvx2);
  for (cpu::Isa isa : levels) {
    test::IsaScope scope(isa);
    std::fill(got.begin(), got.end(), NAN);
    CpuBackend().MatMul(x.data(), c.n, w.view, b, got.data());
    EXPECT_LT(MaxRelErr(got, want), 1e-5)
        << cpu::IsaName(isa) << " n=" << c.n << " out=" << c.out << " in=" << c.in;
  }
}

std::vector<MatMulCase> MatMulCases() {
  std::vector<MatMulCase> cases;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t n : {1, 2, 3, 5, 15, 16, 17, 64, 100, 257}) {
      cases.push_back({n, 37, 77, dt, n % 2 == 1});
      cases.push_back({n, 96, 256, dt, false});
    }
    cases.push_back({257, 131, 1100, dt, true});  // spans two k blocks, odd tail
    cases.push_back({4, 1031, 33, dt, true});
    cases.push_back({70, 7, 1, dt, true});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatMulConformance, ::testing::ValuesIn(MatMulCases()));

TEST(MatMulConformance, GroupMatchesSeparateMatMuls) {
  for (int64_t n : {1, 7, 16, 40, 130}) {
    const int64_t in = 72;
    const auto x = Random(n * in, 20);
    const Weights a = MakeWeights(Random(50 * in, 21), 50, in, DType::BF16);
    const Weights b = MakeWeights(Random(9 * in, 22), 9, in, DType::F16);
    const Weights c = MakeWeights(Random(100 * in, 23), 100, in, DType::F32);
    const auto bias = Random(100, 24);
    std::vector<float> ya(size_t(n * 50)), yb(size_t(n * 9)), yc(size_t(n * 100));
    const MatMulOutput outs[] = {{&a.view, nullptr, ya.data()},
                                 {&b.view, bias.data(), yb.data()},
                                 {&c.view, bias.data(), yc.data()}};
    CpuBackend().MatMulGroup(x.data(), n, std::span(outs));
    for (const MatMulOutput& o : outs) {
      std::vector<float> want(size_t(n * o.w->dim(0)));
      RefBackend().MatMul(x.data(), n, *o.w, o.bias, want.data());
      EXPECT_LT(MaxRelErr(std::vector<float>(o.y, o.y + want.size()), want), 1e-5) << n;
    }
  }
  // Mismatched inner dimensions are refused.
  const Weights a = MakeWeights(Random(8 * 16, 25), 8, 16, DType::F32);
  const Weights b = MakeWeights(Random(8 * 17, 26), 8, 17, DType::F32);
  std::vector<float> x(17, 1.0f), y(8);
  const MatMulOutput bad[] = {{&a.view, nullptr, y.data()}, {&b.view, nullptr, y.data()}};
  EXPECT_THROW(CpuBackend().MatMulGroup(x.data(), 1, std::span(bad)), Error);
}

TEST(MatMulConformance, SameResultOnOneThread) {
  const auto x = Random(40 * 300, 4);
  const Weights w = MakeWeights(Random(200 * 300, 5), 200, 300, DType::BF16);
  std::vector<float> a(40 * 200), b(40 * 200);
  CpuBackend().MatMul(x.data(), 40, w.view, nullptr, a.data());
  ThreadPool::SetGlobalThreads(1);
  CpuBackend().MatMul(x.data(), 40, w.view, nullptr, b.data());
  ThreadPool::SetGlobalThreads(0);
  EXPECT_EQ(a, b);  // the work split does not change the arithmetic
}

TEST(ElementwiseConformance, RmsNormRopeSiluMatchRef) {
  const int64_t rows = 5, heads = 3, hd = 10;
  const auto x = Random(rows * heads * hd, 6), wt = Random(hd, 7);
  std::vector<float> a(x.size()), b(x.size());
  RefBackend().RmsNorm(x.data(), rows * heads, hd, wt.data(), 1e-5f, a.data());
  CpuBackend().RmsNorm(x.data(), rows * heads, hd, wt.data(), 1e-5f, b.data());
  EXPECT_LT(MaxRelErr(b, a), 1e-6);

  std::vector<float> inv_freq(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * i / hd);
  const std::vector<int64_t> pos = {0, 1, 7, 100, 4095};
  a = x;
  b = x;
  RefBackend().Rope(a.data(), rows, heads, hd, pos.data(), inv_freq.data(), 1.1f);
  CpuBackend().Rope(b.data(), rows, heads, hd, pos.data(), inv_freq.data(), 1.1f);
  EXPECT_LT(MaxRelErr(b, a), 1e-6);
  // Position 0 is the identity (times the attention factor).
  for (int64_t j = 0; j < heads * hd; ++j) EXPECT_FLOAT_EQ(a[size_t(j)], x[size_t(j)] * 1.1f);

  const auto g = Random(1001, 8), u = Random(1001, 9);
  a.resize(1001);
  b.resize(1001);
  RefBackend().SiluMul(g.data(), u.data(), 1001, a.data());
  CpuBackend().SiluMul(g.data(), u.data(), 1001, b.data());
  EXPECT_LT(MaxRelErr(b, a), 1e-6);
}

struct AttnCase {
  int64_t n, pos0, heads, kv_heads, hd, window;
  DType dt;
};

class AttentionConformance : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionConformance, CpuMatchesRef) {
  const AttnCase c = GetParam();
  const int64_t cap = c.pos0 + c.n + 3;  // some unused capacity after the tokens
  const auto q = Random(c.n * c.heads * c.hd, 10);
  const Weights k = MakeWeights(Random(c.kv_heads * cap * c.hd, 11), c.kv_heads * cap, c.hd, c.dt);
  const Weights v = MakeWeights(Random(c.kv_heads * cap * c.hd, 12), c.kv_heads * cap, c.hd, c.dt);
  KvView kv{k.view.data, v.view.data, c.dt, cap * c.hd};
  AttentionParams p{c.heads, c.kv_heads, c.hd, 1.0f / std::sqrt(float(c.hd)), c.window};
  std::vector<float> want(q.size()), got(q.size(), NAN);
  RefBackend().Attention(q.data(), c.n, c.pos0, kv, p, want.data());
  CpuBackend().Attention(q.data(), c.n, c.pos0, kv, p, got.data());
  EXPECT_LT(MaxRelErr(got, want), 1e-5);
}

std::vector<AttnCase> AttnCases() {
  std::vector<AttnCase> cases;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    cases.push_back({1, 0, 4, 2, 64, 0, dt});
    cases.push_back({1, 300, 8, 2, 64, 0, dt});
    cases.push_back({257, 0, 4, 1, 24, 0, dt});
    cases.push_back({33, 70, 6, 3, 80, 0, dt});
    cases.push_back({40, 100, 4, 4, 17, 0, dt});  // head_dim not a multiple of 16
    cases.push_back({50, 90, 4, 2, 32, 16, dt});  // sliding window
    cases.push_back({1, 500, 2, 1, 64, 100, dt});
    cases.push_back({64, 10, 8, 2, 64, 0, dt});    // wide path, register accumulators
    cases.push_back({20, 5, 4, 1, 128, 0, dt});    // wide path, head_dim 128, a partial block
    cases.push_back({100, 30, 8, 2, 64, 40, dt});  // wide path with a window
    cases.push_back({7, 0, 16, 2, 64, 0, dt});     // 7 queries x 8 heads = 56 rows (padded)
    // MLA's latent head (16 query heads on 1 kv head of 576): the decode splits the keys over
    // the threads and merges the slices; with a window, slices before it see nothing.
    cases.push_back({1, 1000, 16, 1, 576, 0, dt});
    cases.push_back({3, 700, 16, 1, 576, 200, dt});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionConformance, ::testing::ValuesIn(AttnCases()));

TEST(SmallOps, TopKArgmaxSoftmax) {
  const std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f, 7.0f, 0.0f};
  int32_t idx[3];
  TopK(x.data(), 6, 3, idx);
  EXPECT_EQ(idx[0], 4);
  EXPECT_EQ(idx[1], 1);  // ties: lower index first
  EXPECT_EQ(idx[2], 3);
  EXPECT_EQ(Argmax(x.data(), 6), 4);
  std::vector<float> s = {1.0f, 2.0f, 3.0f};
  Softmax(s.data(), 3);
  EXPECT_NEAR(s[0] + s[1] + s[2], 1.0f, 1e-6);
  EXPECT_NEAR(s[2] / s[1], std::exp(1.0f), 1e-5);
  EXPECT_THROW(TopK(x.data(), 6, 7, idx), Error);
}

}  // namespace
}  // namespace tq::kernels
