// The TurboQuant cache's append ops on CUDA against the ref backend (the scalar codec,
// kernels/kv_encode.cc): KvEncode for every code width (1, 2, 3, 4, 8 bits, two-segment
// fractional and outlier-split formats), scale rule (norm, mse, unbiased), QJL sketch, fp32
// position-major and fp16 head-major sources, head_dim 64 .. 1024; CenterRows and GatherColumns.
// KvEncode is bit-exact but for near-ties (the device sums its doubles in another order): at most
// 0.5% of the vectors may differ, and none may reconstruct worse than the reference's codes
// (x̂'s squared error within 0.1%, the table's nmse vs bound). CenterRows / GatherColumns exact.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "cuda_test_util.h"
#include "kernels/kv_ops.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace tq::kernels {
namespace {

using test::Down;
using test::Up;

struct Case {
  int64_t dim, heads, n;
  int hi, lo;     // bits of the two segments (equal: one segment)
  int64_t cut;    // the second segment's first channel (dim: one segment)
  int64_t group;  // channels per scale
  KvScale scale = KvScale::kMse;
  bool qjl = false;
  bool f16_head_major = false;  // src [heads, cap, dim] fp16 (the cache's tail) instead of fp32
};

// Level tables by bits: Lloyd-Max for N(0, 1) (1..4) and a uniform 256-level grid (8).
const quant::Codebook& Book(int bits) {
  static const quant::Codebook u8 = [] {
    std::vector<float> l(256);
    for (int c = 0; c < 256; ++c) l[size_t(c)] = (c - 127.5f) * 0.03f;
    return quant::CodebookFromLevels(std::move(l));
  }();
  return bits == 8 ? u8 : quant::GaussianCodebook(bits);
}

// The format with level / threshold tables from `tables` (host or device pointers by bits).
KvCodeFormat MakeFormat(const Case& c, const float* const* levels, const float* const* thresholds) {
  KvCodeFormat f;
  f.dim = c.dim;
  f.group = c.group;
  f.num_segments = c.cut < c.dim ? 2 : 1;
  int64_t off = 0;
  for (int s = 0; s < f.num_segments; ++s) {
    KvCodeSegment& g = f.segments[s];
    const int b = s == 0 ? c.hi : c.lo;
    g.begin = s == 0 ? 0 : c.cut;
    g.end = s == 0 ? c.cut : c.dim;
    g.format = *quant::FormatForBits(b);
    g.levels = levels[b];
    g.thresholds = thresholds[b];
    g.byte_offset = off;
    off += int64_t(quant::PackedBytes(g.format, g.end - g.begin));
  }
  f.code_bytes = off;
  return f;
}

double SquaredError(const KvCodeFormat& f, const uint8_t* codes, const uint16_t* scales,
                    const float* x) {
  std::vector<float> back(size_t(f.dim));
  DecodeKvVector(f, codes, scales, back.data());
  double e = 0;
  for (int64_t i = 0; i < f.dim; ++i)
    e += (double(x[i]) - back[size_t(i)]) * (x[i] - back[size_t(i)]);
  return e;
}

void RunCase(Backend& gpu, const Case& c) {
  Backend& ref = RefBackend();
  std::mt19937 rng(uint32_t(c.dim * 7 + c.n + c.hi * 3 + c.lo));
  std::normal_distribution<float> normal;
  const int64_t H = c.heads, D = c.dim, cap = c.n + 5, slot0 = 3, code_cap = slot0 + c.n + 2;

  // Tables: host and device copies.
  const float* hl[9] = {};
  const float* ht[9] = {};
  const float* dl[9] = {};
  const float* dt[9] = {};
  std::vector<DeviceBuffer> keep;
  for (int b : {1, 2, 3, 4, 8}) {
    const quant::Codebook& book = Book(b);
    hl[b] = book.levels.data();
    ht[b] = book.thresholds.data();
    keep.push_back(Up(gpu, book.levels));
    dl[b] = keep.back().as<float>();
    keep.push_back(Up(gpu, book.thresholds));
    dt[b] = keep.back().as<float>();
  }
  KvEncodeParams hp, dp;
  hp.format = MakeFormat(c, hl, ht);
  dp.format = MakeFormat(c, dl, dt);
  hp.scale = dp.scale = c.scale;
  const KvCodeFormat& f = hp.format;
  std::vector<float> s_matrix(size_t(D * D));
  for (auto& v : s_matrix) v = normal(rng);
  auto ds = Up(gpu, s_matrix);
  if (c.qjl) {
    hp.qjl_matrix = s_matrix.data();
    dp.qjl_matrix = ds.as<float>();
    hp.qjl_m = dp.qjl_m = D;
  }

  // The vectors (i, h), with per-vector magnitudes from 1e-3 to 1e3, an all-zero one and one
  // whose RMS overflows fp16 (the 65504 clamp).
  std::vector<float> x(size_t(c.n * H * D));
  for (int64_t t = 0; t < c.n * H; ++t) {
    const float mag = std::pow(10.0f, float(int(t % 7) - 3));
    for (int64_t j = 0; j < D; ++j) x[size_t(t * D + j)] = normal(rng) * mag;
  }
  if (c.n * H > 2) {
    std::fill_n(x.begin() + D, D, 0.0f);
    // (fp16 sources: large but finite, the largest fp16 being 65504)
    const float big = c.f16_head_major ? 2.0e4f : 1.0e5f;
    for (int64_t j = 0; j < D; ++j) x[size_t(2 * D + j)] = normal(rng) * big;
  }
  // Source layout: fp32 [n, H, D], or fp16 [H, cap, D] (the values rounded to fp16 first).
  int64_t pos_stride = H * D, head_stride = D;
  std::vector<uint8_t> src;
  if (c.f16_head_major) {
    pos_stride = D;
    head_stride = cap * D;
    std::vector<uint16_t> h16(size_t(H * cap * D), 0);
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < D; ++j) {
          const uint16_t v = F32ToF16(x[size_t((i * H + h) * D + j)]);
          h16[size_t(h * head_stride + i * pos_stride + j)] = v;
          x[size_t((i * H + h) * D + j)] = F16ToF32(v);  // what both encoders see
        }
    src.resize(h16.size() * 2);
    std::memcpy(src.data(), h16.data(), src.size());
  } else {
    src.resize(x.size() * 4);
    std::memcpy(src.data(), x.data(), src.size());
  }
  const DType dtype = c.f16_head_major ? DType::F16 : DType::F32;

  // Destinations: [H, code_cap] slots, poisoned (0xff) so that unwritten or stray bytes show.
  const int64_t slots = H * code_cap, sb = QjlSignBytes(D);
  std::vector<uint8_t> codes(size_t(slots * f.code_bytes), 0xff), bits(size_t(slots * sb), 0xff);
  std::vector<uint16_t> scales(size_t(slots * f.groups()), 0xffff), norms(size_t(slots), 0xffff);
  auto dcodes = Up(gpu, codes), dbits = Up(gpu, bits);
  auto dscales = Up(gpu, scales), dnorms = Up(gpu, norms);
  auto dsrc = Up(gpu, src);
  KvCodeSlots hs{codes.data(), scales.data(), bits.data(), norms.data(), code_cap};
  KvCodeSlots gs{dcodes.as<uint8_t>(), dscales.as<uint16_t>(), dbits.as<uint8_t>(),
                 dnorms.as<uint16_t>(), code_cap};
  if (!c.qjl) hs.qjl_bits = gs.qjl_bits = nullptr, hs.qjl_norm = gs.qjl_norm = nullptr;
  ref.KvEncode(hp, src.data(), dtype, c.n, H, pos_stride, head_stride, hs, slot0);
  gpu.KvEncode(dp, dsrc.data(), dtype, c.n, H, pos_stride, head_stride, gs, slot0);
  const auto gcodes = Down<uint8_t>(gpu, dcodes, codes.size());
  const auto gscales = Down<uint16_t>(gpu, dscales, scales.size());
  const auto gbits = Down<uint8_t>(gpu, dbits, bits.size());
  const auto gnorms = Down<uint16_t>(gpu, dnorms, norms.size());

  int differ = 0;
  double err_ref = 0, err_gpu = 0, norm = 0;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t s = 0; s < code_cap; ++s) {
      const int64_t slot = h * code_cap + s;
      const bool written = s >= slot0 && s < slot0 + c.n;
      const size_t cb = size_t(slot * f.code_bytes), sc = size_t(slot * f.groups());
      bool same =
          std::equal(codes.begin() + long(cb), codes.begin() + long(cb + size_t(f.code_bytes)),
                     gcodes.begin() + long(cb)) &&
          std::equal(scales.begin() + long(sc), scales.begin() + long(sc + size_t(f.groups())),
                     gscales.begin() + long(sc));
      if (c.qjl)
        same = same && norms[size_t(slot)] == gnorms[size_t(slot)] &&
               std::equal(bits.begin() + slot * sb, bits.begin() + (slot + 1) * sb,
                          gbits.begin() + slot * sb);
      if (!written) {
        ASSERT_TRUE(same) << "slot " << s << " of head " << h << " was not to be written";
        continue;
      }
      const float* xv = x.data() + ((s - slot0) * H + h) * D;
      const double er = SquaredError(f, codes.data() + cb, scales.data() + sc, xv);
      const double eg = SquaredError(f, gcodes.data() + cb, gscales.data() + sc, xv);
      double xx = 0;
      for (int64_t j = 0; j < D; ++j) xx += double(xv[j]) * xv[j];
      if (!same) {
        ++differ;
        EXPECT_LE(eg, er * 1.001 + 1e-12 * xx) << "slot " << s << " head " << h;
      }
      err_ref += xx > 0 ? er / xx : er;
      err_gpu += xx > 0 ? eg / xx : eg;
      norm += 1;
    }
  }
  const int vectors = int(c.n * H);
  EXPECT_LE(differ, std::max(1, vectors / 200)) << differ << " of " << vectors << " vectors";
  const std::string what =
      fmt::format("d={} g={} K{}{} {} {}{} n={} x {}{}", D, c.group, c.hi,
                  c.hi == c.lo ? "" : fmt::format("/{}@{}", c.lo, c.cut),
                  c.scale == KvScale::kNorm  ? "norm"
                  : c.scale == KvScale::kMse ? "mse"
                                             : "unbiased",
                  c.f16_head_major ? "f16 [H,cap,D]" : "f32 [n,H,D]", c.qjl ? " qjl" : "", c.n, H,
                  differ ? fmt::format(" ({} differ)", differ) : "");
  // nmse column: mean relative squared error of the device's codes; bound: the reference's
  // (plus 0.1%).
  test::ResultTable::Get().Add({test::CurrentKind(), "KvEncode", what, err_gpu / norm,
                                err_ref / norm * 1.001 + 1e-12,
                                err_gpu <= err_ref * 1.001 + 1e-12 * norm});
  EXPECT_LE(err_gpu, err_ref * 1.001 + 1e-12 * norm);
}

class CudaKvEncode : public ::testing::TestWithParam<std::tuple<std::string, Case>> {};

TEST_P(CudaKvEncode, MatchesRef) {
  const auto& [kind, c] = GetParam();
  TQ_REQUIRE_BACKEND(gpu, kind);
  if (kind == "emu" && c.dim * c.n * c.heads > 40000)
    GTEST_SKIP() << "too large for the host emulator (runs on the GPU)";
  RunCase(*gpu, c);
}

// {dim, heads, n, hi, lo, cut, group, scale, qjl, f16_head_major}
INSTANTIATE_TEST_SUITE_P(
    Formats, CudaKvEncode,
    ::testing::Combine(
        ::testing::ValuesIn(test::kCudaKinds),
        ::testing::Values(
            Case{64, 2, 33, 4, 4, 64, 64},                                 // q4, mse
            Case{128, 4, 16, 3, 3, 128, 128, KvScale::kNorm},              // q3, norm
            Case{128, 2, 20, 2, 2, 128, 128, KvScale::kUnbiased},          // q2, unbiased
            Case{64, 2, 16, 8, 8, 64, 64},                                 // 8-bit grid
            Case{64, 2, 16, 3, 2, 32, 64},                                 // 2.5 bits
            Case{80, 2, 9, 4, 3, 40, 80},                                  // 3.5, partial units
            Case{64, 3, 12, 4, 2, 32, 32},                                 // outlier split
            Case{256, 2, 8, 4, 4, 256, 128},                               // two groups
            Case{96, 3, 8, 4, 4, 96, 32},                                  // head_dim 96
            Case{64, 2, 20, 1, 1, 64, 64, KvScale::kMse, true},            // QJL at 2 bits
            Case{128, 2, 12, 3, 3, 128, 128, KvScale::kMse, true, true},   // QJL, fp16 tail
            Case{128, 8, 32, 4, 4, 128, 128, KvScale::kMse, false, true},  // the tail's block
            Case{128, 8, 512, 4, 4, 128, 128},                             // a prompt chunk
            Case{1024, 2, 4, 4, 4, 1024, 128, KvScale::kMse, true})),      // the largest dim
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::to_string(info.index); });

class CudaKvAppendOps : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, CudaKvAppendOps, ::testing::ValuesIn(test::kCudaKinds),
                         [](const auto& info) { return info.param; });

TEST_P(CudaKvAppendOps, CenterRowsIsExact) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const int64_t rows = 37, width = 3 * 64;
  std::vector<float> x(static_cast<size_t>(rows * width));
  for (auto& v : x) v = normal(rng) + 0.5f;
  for (int64_t mean_rows : {int64_t(0), int64_t(1), int64_t(20), rows}) {
    std::vector<float> hx = x;
    std::vector<float> hm(static_cast<size_t>(width));
    for (auto& v : hm) v = normal(rng);  // the kept mean when mean_rows == 0
    auto dx = Up(*gpu, hx), dm = Up(*gpu, hm);
    RefBackend().CenterRows(hx.data(), rows, width, hm.data(), mean_rows);
    gpu->CenterRows(dx.as<float>(), rows, width, dm.as<float>(), mean_rows);
    EXPECT_EQ(Down<float>(*gpu, dx, hx.size()), hx) << mean_rows;
    EXPECT_EQ(Down<float>(*gpu, dm, hm.size()), hm) << mean_rows;
    test::ResultTable::Get().Add({test::CurrentKind(), "CenterRows",
                                  fmt::format("{} x {}, mean of {}", rows, width, mean_rows), 0, 0,
                                  true});
  }
}

TEST_P(CudaKvAppendOps, GatherColumnsIsExact) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  const int64_t rows = 10, dim = 64, period = 3;
  std::vector<float> x(size_t(rows * dim)), want(x.size());
  for (auto& v : x) v = normal(rng);
  std::vector<int32_t> order(size_t(period * dim));
  for (int64_t p = 0; p < period; ++p) {
    std::iota(order.begin() + p * dim, order.begin() + (p + 1) * dim, 0);
    std::shuffle(order.begin() + p * dim, order.begin() + (p + 1) * dim, rng);
  }
  RefBackend().GatherColumns(x.data(), rows, dim, order.data(), period, want.data());
  for (int64_t r = 0; r < rows; ++r)  // the contract, spelled out
    for (int64_t j = 0; j < dim; ++j)
      ASSERT_EQ(want[size_t(r * dim + j)],
                x[size_t(r * dim + order[size_t((r % period) * dim + j)])]);
  auto dx = Up(*gpu, x), dorder = Up(*gpu, order);
  auto dy = test::Poisoned<float>(*gpu, x.size());
  gpu->GatherColumns(dx.as<float>(), rows, dim, dorder.as<int32_t>(), period, dy.as<float>());
  EXPECT_EQ(Down<float>(*gpu, dy, x.size()), want);
  test::ResultTable::Get().Add({test::CurrentKind(), "GatherColumns",
                                fmt::format("{} x {}, period {}", rows, dim, period), 0, 0, true});
}

TEST_P(CudaKvAppendOps, BadEncodeIsAnError) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  KvEncodeParams p;  // no format
  KvCodeSlots s;
  EXPECT_THROW(gpu->KvEncode(p, nullptr, DType::F32, 1, 1, 64, 64, s, 0), Error);
  p.format.dim = p.format.group = 64;
  EXPECT_THROW(gpu->KvEncode(p, nullptr, DType::BF16, 1, 1, 64, 64, s, 0), Error);
}

}  // namespace
}  // namespace tq::kernels
