// CompressedAttention on CUDA against RefCompressedAttention: every span layout (sink, coded
// middle, recent window, fp16 only, coded only, queries crossing span boundaries), mean-centered
// values, the outlier-channel split (channel orders), QJL sketches, sliding windows, fractional
// widths (two code segments), GQA and cache lengths 1 .. 32K. Bound: NMSE 1e-9 (fp32 against the
// double oracle; a wrong code, scale, sign or order gives O(1e-2 .. 1)).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

using test::Up;

constexpr double kBound = 1e-9;

struct Case {
  int64_t head_dim, heads, kv_heads, sink, coded, tail, n;
  int k_hi, k_lo, v_hi, v_lo;  // bits; equal hi/lo: one segment
  bool qjl = false, center = false, outliers = false;
  int64_t window = 0;
};

std::vector<float> Uniform8() {
  std::vector<float> l(256);
  for (int c = 0; c < 256; ++c) l[size_t(c)] = (c - 127.5f) * 0.03f;
  return l;
}

KvCodeFormat MakeFormat(int64_t dim, int hi, int lo, const float* const* levels) {
  KvCodeFormat f;
  f.dim = dim;
  f.group = dim % 128 == 0 ? 128 : (dim % 32 == 0 ? 32 : dim);
  if (dim <= 128 && (dim & (dim - 1)) == 0) f.group = dim;
  f.num_segments = hi == lo ? 1 : 2;
  // A second segment starts on a 32-code unit (CheckCompressedKvView).
  const int64_t cut = hi == lo ? dim : std::max<int64_t>(32, dim / 2 / 32 * 32);
  int64_t off = 0;
  for (int s = 0; s < f.num_segments; ++s) {
    KvCodeSegment& seg = f.segments[s];
    const int b = s == 0 ? hi : lo;
    seg.begin = s == 0 ? 0 : cut;
    seg.end = s == 0 ? cut : dim;
    seg.format = *quant::FormatForBits(b);
    seg.levels = levels[b];
    seg.byte_offset = off;
    off += int64_t(quant::PackedBytes(seg.format, seg.end - seg.begin));
  }
  f.code_bytes = off;
  return f;
}

// Host arrays of one random compressed layer, their device copies, and both views.
struct Layer {
  std::vector<std::vector<uint8_t>> host;  // every array, as bytes
  std::vector<DeviceBuffer> dev;
  CompressedKvView h, d;  // host pointers / device pointers
};

template <typename T>
std::vector<uint8_t> AsBytes(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

void RunCase(Backend& gpu, const Case& c) {
  std::mt19937 rng(uint32_t(c.head_dim * 131 + c.coded + c.n));
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t d = c.head_dim, H = c.kv_heads, total = c.sink + c.coded + c.tail;
  const int64_t pos0 = total - c.n;
  ASSERT_GE(pos0, 0);

  // Level tables by bits (host), uploaded once per case.
  const auto u8 = Uniform8();
  std::vector<std::vector<float>> tables(9);
  for (int b : {1, 2, 3, 4}) tables[size_t(b)] = quant::GaussianCodebook(b).levels;
  tables[8] = u8;
  const float* host_levels[9] = {};
  std::vector<DeviceBuffer> dev_tables(9);
  const float* dev_levels[9] = {};
  for (int b : {1, 2, 3, 4, 8}) {
    host_levels[b] = tables[size_t(b)].data();
    dev_tables[size_t(b)] = Up(gpu, tables[size_t(b)]);
    dev_levels[b] = dev_tables[size_t(b)].as<float>();
  }
  const auto rk = quant::HadamardRotation::Make(d, 1, d),
             rv = quant::HadamardRotation::Make(d, 2, 32);

  Layer L;
  L.host.reserve(32);
  // Adds a host array and its device copy; returns {host pointer, device pointer}.
  auto add = [&](std::vector<uint8_t> bytes) {
    L.host.push_back(std::move(bytes));
    L.dev.push_back(gpu.Upload(L.host.back().data(), L.host.back().size(), "kv test"));
    return std::pair<const void*, const void*>(L.host.back().data(), L.dev.back().data());
  };
  auto f16 = [&](int64_t count) {
    std::vector<uint16_t> x(static_cast<size_t>(count));
    for (auto& e : x) e = F32ToF16(normal(rng));
    return AsBytes(x);
  };
  auto bytes = [&](int64_t count) {
    std::vector<uint8_t> x(static_cast<size_t>(count));
    for (auto& e : x) e = uint8_t(byte(rng));
    return x;
  };
  auto scales = [&](int64_t count) {
    std::vector<uint16_t> x(static_cast<size_t>(count));
    for (auto& e : x) e = F32ToF16(0.5f + std::abs(normal(rng)));
    return AsBytes(x);
  };
  for (CompressedKvView* v : {&L.h, &L.d}) {
    const float* const* lv = v == &L.h ? host_levels : dev_levels;
    v->k_rotation = &rk;
    v->v_rotation = &rv;
    v->k_format = MakeFormat(d, c.k_hi, c.k_lo, lv);
    v->v_format = MakeFormat(d, c.v_hi, c.v_lo, lv);
    v->num_spans = 3;
  }
  const KvCodeFormat& kf = L.h.k_format;
  const KvCodeFormat& vf = L.h.v_format;
  auto sk = add(f16(H * c.sink * d)), sv = add(f16(H * c.sink * d));
  auto tk = add(f16(H * (c.tail + 3) * d)), tv = add(f16(H * (c.tail + 3) * d));
  auto ck = add(bytes(H * c.coded * kf.code_bytes)), cv = add(bytes(H * c.coded * vf.code_bytes));
  auto gk = add(scales(H * c.coded * kf.groups())), gv = add(scales(H * c.coded * vf.groups()));
  std::vector<float> s_matrix(static_cast<size_t>(d * d));
  for (auto& x : s_matrix) x = normal(rng);
  auto qs = add(AsBytes(s_matrix));
  auto qb = add(bytes(H * c.coded * QjlSignBytes(d))), qn = add(scales(H * c.coded));
  std::vector<float> mu(static_cast<size_t>(H * d));
  for (auto& x : mu) x = normal(rng) * 0.3f;
  auto mo = add(AsBytes(mu));
  std::vector<int32_t> korder(size_t(H * d)), vorder(size_t(H * d));
  for (int64_t h = 0; h < H; ++h) {
    std::iota(korder.begin() + h * d, korder.begin() + (h + 1) * d, 0);
    std::iota(vorder.begin() + h * d, vorder.begin() + (h + 1) * d, 0);
    std::shuffle(korder.begin() + h * d, korder.begin() + (h + 1) * d, rng);
    std::shuffle(vorder.begin() + h * d, vorder.begin() + (h + 1) * d, rng);
  }
  auto ko = add(AsBytes(korder)), vo = add(AsBytes(vorder));
  for (int which = 0; which < 2; ++which) {
    CompressedKvView& v = which == 0 ? L.h : L.d;
    auto pick = [&](const std::pair<const void*, const void*>& p) {
      return which == 0 ? p.first : p.second;
    };
    v.spans[0] = {0,
                  c.sink,
                  c.sink,
                  false,
                  static_cast<const uint16_t*>(pick(sk)),
                  static_cast<const uint16_t*>(pick(sv))};
    KvSpan& mid = v.spans[1];
    mid.begin = c.sink;
    mid.end = c.sink + c.coded;
    mid.head_stride = c.coded;
    mid.coded = true;
    mid.k_codes = static_cast<const uint8_t*>(pick(ck));
    mid.v_codes = static_cast<const uint8_t*>(pick(cv));
    mid.k_scales = static_cast<const uint16_t*>(pick(gk));
    mid.v_scales = static_cast<const uint16_t*>(pick(gv));
    v.spans[2] = {mid.end,
                  total,
                  c.tail + 3,
                  false,
                  static_cast<const uint16_t*>(pick(tk)),
                  static_cast<const uint16_t*>(pick(tv))};
    if (c.qjl) {
      v.qjl_matrix = static_cast<const float*>(pick(qs));
      v.qjl_m = d;
      mid.k_qjl = static_cast<const uint8_t*>(pick(qb));
      mid.k_qjl_norm = static_cast<const uint16_t*>(pick(qn));
    }
    if (c.center) v.v_offset = static_cast<const float*>(pick(mo));
    if (c.outliers) {
      v.k_order = static_cast<const int32_t*>(pick(ko));
      v.v_order = static_cast<const int32_t*>(pick(vo));
    }
  }
  AttentionParams p;
  p.num_heads = c.heads;
  p.num_kv_heads = H;
  p.head_dim = d;
  p.scale = 1.0f / std::sqrt(float(d));
  p.window = c.window;
  std::vector<float> q(size_t(c.n * c.heads * d)), want(q.size());
  for (auto& x : q) x = normal(rng) * 2.0f;
  RefCompressedAttention(q.data(), c.n, pos0, L.h, p, want.data());
  auto dq = Up(gpu, q);
  auto dy = test::Poisoned<float>(gpu, q.size());
  gpu.CompressedAttention(dq.as<float>(), c.n, pos0, L.d, p, dy.as<float>());
  const std::string layout =
      fmt::format("d={} h={}/{} spans {}+{}+{} n={} K{}{} V{}{}{}{}{}{}", d, c.heads, H, c.sink,
                  c.coded, c.tail, c.n, c.k_hi, c.k_hi == c.k_lo ? "" : fmt::format("/{}", c.k_lo),
                  c.v_hi, c.v_hi == c.v_lo ? "" : fmt::format("/{}", c.v_lo), c.qjl ? " qjl" : "",
                  c.center ? " center" : "", c.outliers ? " outliers" : "",
                  c.window ? fmt::format(" window={}", c.window) : "");
  test::Expect("CompressedAttention", layout, test::Down<float>(gpu, dy, q.size()), want, kBound);
}

// (backend kind, case): every case on "cuda" (a GPU) and "emu" (the host emulator).
class CudaKvAttention : public ::testing::TestWithParam<std::tuple<std::string, Case>> {};

TEST_P(CudaKvAttention, MatchesRef) {
  const auto& [kind, c] = GetParam();
  TQ_REQUIRE_BACKEND(gpu, kind);
  // The emulator runs every CUDA thread as a fiber: cases over ~16K (head, query, key) visits
  // take minutes there, and their index arithmetic is that of the smaller cases.
  const int64_t total = c.sink + c.coded + c.tail;
  const int64_t visits = c.heads * c.n * (c.window > 0 ? std::min(c.window, total) : total);
  if (kind == "emu" && visits > 16000)
    GTEST_SKIP() << "too large for the host emulator (runs on the GPU)";
  RunCase(*gpu, c);
}

// Cases: {head_dim, heads, kv_heads, sink, coded, tail, n, K hi, K lo, V hi, V lo, qjl, center,
// outliers, window}.
INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaKvAttention,
    ::testing::Combine(
        ::testing::ValuesIn(test::kCudaKinds),
        ::testing::Values(
            Case{64, 8, 2, 0, 40, 0, 1, 4, 4, 4, 4},                 // coded only, decode
            Case{64, 8, 2, 0, 1, 0, 1, 4, 4, 3, 3},                  // cache length 1
            Case{64, 4, 4, 1, 0, 0, 1, 4, 4, 4, 4},                  // one fp16 sink only
            Case{64, 4, 2, 0, 0, 17, 17, 4, 4, 4, 4},                // fp16 window only, prefill
            Case{64, 8, 2, 0, 300, 0, 1, 8, 8, 3, 3},                // K8V3
            Case{64, 4, 4, 5, 70, 9, 17, 3, 3, 2, 2},                // all spans, across edges
            Case{64, 8, 2, 0, 257, 0, 257, 4, 3, 3, 2},              // prefill, K3.5V2.5
            Case{128, 8, 1, 3, 100, 20, 33, 8, 8, 4, 3},             // head_dim 128, V3.5
            Case{256, 4, 2, 0, 65, 4, 5, 4, 4, 3, 3},                // groups of 128
            Case{128, 8, 2, 2, 60, 6, 2, 4, 4, 3, 3},                // head_dim 128, K4V3
            Case{128, 4, 1, 0, 37, 3, 9, 8, 8, 2, 2},                // head_dim 128, K8V2, G 4
            Case{64, 12, 2, 1, 45, 0, 3, 2, 2, 4, 4},                // K2V4, 6 heads a group
            Case{96, 6, 3, 2, 50, 0, 3, 4, 4, 4, 4},                 // head_dim 96
            Case{80, 4, 2, 1, 30, 2, 4, 4, 3, 3, 3},                 // head_dim 80 (group 80)
            Case{64, 32, 8, 0, 1000, 0, 1, 2, 2, 3, 3},              // K2, 1000 coded
            Case{64, 8, 2, 4, 200, 16, 1, 4, 4, 3, 3, false, true},  // centering
            Case{64, 8, 2, 4, 200, 16, 9, 4, 4, 3, 3, false, false, true},  // outlier split
            Case{128, 8, 2, 4, 200, 16, 3, 4, 3, 3, 3, true, true, true},   // everything at once
            Case{64, 8, 2, 0, 300, 0, 1, 3, 3, 3, 3, true},                 // QJL decode
            Case{64, 8, 2, 0, 130, 0, 1, 1, 1, 4, 4, true},                 // QJL on 1-bit keys
            Case{64, 4, 4, 5, 70, 9, 17, 2, 1, 3, 3, true},                 // QJL, all spans
            Case{64, 8, 2, 0, 257, 0, 257, 2, 2, 3, 3, true},               // QJL prefill
            Case{64, 8, 2, 4, 500, 16, 5, 4, 4, 3, 3, false, false, false, 64},  // sliding window
            Case{64, 8, 2, 4, 500, 16, 1, 4, 4, 3, 3, false, true, true, 300},  // window into codes
            // Long enough for the pipelined kernel's stages to wrap on the emulator too:
            Case{64, 4, 1, 3, 2000, 5, 1, 4, 4, 3, 3},     // G 4, 6 tiles a block
            Case{128, 8, 1, 0, 1900, 7, 1, 4, 4, 2, 2},    // G 8, 5 tiles a block
            Case{256, 2, 1, 2, 900, 3, 2, 8, 8, 4, 4},     // 32-position tiles
            Case{64, 4, 1, 0, 1500, 0, 1, 3, 3, 3, 3},     // 24-byte code rows: 8-byte copies
            Case{128, 32, 8, 4, 4076, 16, 1, 4, 4, 3, 3},  // 4K cache
            Case{128, 8, 2, 4, 32748, 16, 1, 4, 4, 3, 3},  // 32K cache, K4V3
            Case{128, 8, 2, 4, 32748, 16, 1, 8, 8, 3, 3, false, true},         // 32K cache, K8V3
            Case{128, 8, 2, 4, 32700, 64, 2, 3, 3, 3, 3, true, true, true})),  // 32K, everything
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::to_string(info.index); });

class CudaKvAttentionChecks : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, CudaKvAttentionChecks, ::testing::ValuesIn(test::kCudaKinds),
                         [](const auto& info) { return info.param; });

TEST_P(CudaKvAttentionChecks, BadViewIsAnError) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  CompressedKvView kv;  // no rotations, no spans
  AttentionParams p{4, 2, 64, 0.125f, 0};
  EXPECT_THROW(gpu->CompressedAttention(nullptr, 1, 0, kv, p, nullptr), Error);
  p.head_dim = 1024;  // over the kernel's limit
  EXPECT_THROW(gpu->CompressedAttention(nullptr, 1, 0, kv, p, nullptr), Error);
}

}  // namespace
}  // namespace tq::kernels
