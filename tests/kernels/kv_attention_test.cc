// The cpu compressed-attention kernel against the scalar oracle, on random codes of every width,
// head dims with and without the SIMD layout, GQA, 1..257 query rows and all three span kinds.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/kv_ops.h"
#include "quant/codebook.h"
#include "quant/packing.h"

namespace tq::kernels {
namespace {

struct Case {
  int64_t head_dim, heads, kv_heads, sink, coded, tail, n;
  int k_bits_hi, k_bits_lo, v_bits_hi, v_bits_lo;  // equal hi/lo: one segment
  bool qjl = false;                                // QJL sketches on the coded keys
};

std::vector<float> Uniform8() {
  std::vector<float> l(256);
  for (int c = 0; c < 256; ++c) l[static_cast<size_t>(c)] = (c - 127.5f) * 0.03f;
  return l;
}

KvCodeFormat MakeFormat(int64_t dim, int hi, int lo, const std::vector<float>& uniform8) {
  KvCodeFormat f;
  f.dim = dim;
  f.group = dim <= 128 && (dim & (dim - 1)) == 0 ? dim : (dim % 128 == 0 ? 128 : 32);
  if (dim % 32 != 0) f.group = dim;
  f.num_segments = hi == lo ? 1 : 2;
  const int64_t cut = hi == lo ? dim : dim / 2;
  int64_t off = 0;
  for (int s = 0; s < f.num_segments; ++s) {
    KvCodeSegment& seg = f.segments[s];
    const int b = s == 0 ? hi : lo;
    seg.begin = s == 0 ? 0 : cut;
    seg.end = s == 0 ? cut : dim;
    seg.format = *quant::FormatForBits(b);
    seg.levels = b == 8 ? uniform8.data() : quant::GaussianCodebook(b).levels.data();
    seg.uniform = b == 8;
    seg.lo = seg.levels[0];
    seg.step = seg.levels[1] - seg.levels[0];
    seg.byte_offset = off;
    off += int64_t(quant::PackedBytes(seg.format, seg.end - seg.begin));
  }
  f.code_bytes = off;
  return f;
}

// Runs the cpu kernel and the oracle on random spans; returns the NMSE of cpu vs ref.
double CpuVsRefNmse(const Case& c, std::vector<float>* ref_out = nullptr) {
  const std::vector<float> u8 = Uniform8();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t d = c.head_dim, H = c.kv_heads, total = c.sink + c.coded + c.tail;
  const int64_t pos0 = total - c.n;
  TQ_CHECK(pos0 >= 0, "test", "bad case");
  CompressedKvView kv;
  const auto rk = quant::HadamardRotation::Make(d, 1, d),
             rv = quant::HadamardRotation::Make(d, 2, d);
  kv.k_rotation = &rk;
  kv.v_rotation = &rv;
  kv.k_format = MakeFormat(d, c.k_bits_hi, c.k_bits_lo, u8);
  kv.v_format = MakeFormat(d, c.v_bits_hi, c.v_bits_lo, u8);
  auto f16 = [&](int64_t count) {
    std::vector<uint16_t> x(static_cast<size_t>(count));
    for (auto& e : x) e = F32ToF16(normal(rng));
    return x;
  };
  auto bytes = [&](int64_t count) {
    std::vector<uint8_t> x(static_cast<size_t>(count));
    for (auto& e : x) e = uint8_t(byte(rng));
    return x;
  };
  auto scales = [&](int64_t count) {
    std::vector<uint16_t> x(static_cast<size_t>(count));
    for (auto& e : x) e = F32ToF16(0.5f + std::abs(normal(rng)));
    return x;
  };
  const auto sink_k = f16(H * c.sink * d), sink_v = f16(H * c.sink * d);
  const auto tail_k = f16(H * (c.tail + 3) * d), tail_v = f16(H * (c.tail + 3) * d);
  const auto codes_k = bytes(H * c.coded * kv.k_format.code_bytes);
  const auto codes_v = bytes(H * c.coded * kv.v_format.code_bytes);
  const auto sc_k = scales(H * c.coded * kv.k_format.groups());
  const auto sc_v = scales(H * c.coded * kv.v_format.groups());
  kv.num_spans = 3;
  kv.spans[0] = {0, c.sink, c.sink, false, sink_k.data(), sink_v.data()};
  KvSpan& mid = kv.spans[1];
  mid.begin = c.sink;
  mid.end = c.sink + c.coded;
  mid.head_stride = c.coded;
  mid.coded = true;
  mid.k_codes = codes_k.data();
  mid.v_codes = codes_v.data();
  mid.k_scales = sc_k.data();
  mid.v_scales = sc_v.data();
  kv.spans[2] = {mid.end, total, c.tail + 3, false, tail_k.data(), tail_v.data()};
  // QJL: a random matrix S [d, d], random sign bits and residual norms per coded key.
  // (Drawn either way, so that the queries below are the same with and without sketches.)
  std::vector<float> qjl_s;
  for (int64_t i = 0; i < d * d; ++i) qjl_s.push_back(normal(rng));
  const auto qjl_bits = bytes(H * c.coded * QjlSignBytes(d));
  const auto qjl_norm = scales(H * c.coded);
  if (c.qjl) {
    kv.qjl_matrix = qjl_s.data();
    kv.qjl_m = d;
    mid.k_qjl = qjl_bits.data();
    mid.k_qjl_norm = qjl_norm.data();
  }
  // The 3-bit level table has 8 entries: codes of random bytes may be any value of the format.
  AttentionParams p;
  p.num_heads = c.heads;
  p.num_kv_heads = H;
  p.head_dim = d;
  p.scale = 1.0f / std::sqrt(float(d));
  std::vector<float> q(static_cast<size_t>(c.n * c.heads * d)), ref(q.size()), cpu(q.size());
  for (auto& x : q) x = normal(rng) * 2.0f;
  RefCompressedAttention(q.data(), c.n, pos0, kv, p, ref.data());
  CpuCompressedAttention(q.data(), c.n, pos0, kv, p, cpu.data());
  if (ref_out) *ref_out = ref;
  double err = 0, norm = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    if (!std::isfinite(cpu[i])) return INFINITY;
    err += (cpu[i] - ref[i]) * double(cpu[i] - ref[i]);
    norm += ref[i] * double(ref[i]);
  }
  return err / norm;
}

class KvAttentionTest : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override { SetKvInt8Scoring(true); }
};

TEST_P(KvAttentionTest, CpuMatchesRef) {
  SetKvInt8Scoring(false);  // fp32 scores: the same arithmetic as the oracle up to rounding
  EXPECT_LT(CpuVsRefNmse(GetParam()), 1e-9) << "NMSE";
}

TEST_P(KvAttentionTest, CpuInt8ScoresMatchRef) {
  // Int8 scores (VNNI CPUs; elsewhere this is the fp32 path again): the rounding of the query and
  // of the 2-4-bit levels to int8 moves scores by ~0.5% of their spread. A wrong byte order, bias
  // or scale gives an NMSE of order 1.
  SetKvInt8Scoring(true);
  EXPECT_LT(CpuVsRefNmse(GetParam()), 2e-3) << "NMSE";
}

#if defined(__x86_64__)
TEST(KvAttention, Int8ScoringIsTakenOnVnni) {
  if (!__builtin_cpu_supports("avx512vnni")) GTEST_SKIP() << "no AVX-512 VNNI";
  // Decode over coded keys of every int8-scored width: the int8 path differs from the exact one.
  for (int bits : {2, 3, 4, 8}) {
    const Case c{64, 8, 2, 0, 100, 0, 1, bits, bits, 4, 4};
    SetKvInt8Scoring(true);
    const double int8 = CpuVsRefNmse(c);
    SetKvInt8Scoring(false);
    const double exact = CpuVsRefNmse(c);
    EXPECT_LT(exact, 1e-9) << bits;
    EXPECT_GT(int8, 1e-12) << bits;
    EXPECT_LT(int8, 2e-3) << bits;
  }
  // The QJL sketch term by VNNI: 1-bit key codes (no int8 key scoring), so only the sketch
  // term can make the int8 run differ from the exact one.
  const Case qjl{64, 8, 2, 0, 100, 0, 1, 1, 1, 4, 4, true};
  SetKvInt8Scoring(true);
  const double int8 = CpuVsRefNmse(qjl);
  SetKvInt8Scoring(false);
  EXPECT_LT(CpuVsRefNmse(qjl), 1e-9);
  EXPECT_GT(int8, 1e-12);
  EXPECT_LT(int8, 2e-3);
  SetKvInt8Scoring(true);
}
#endif

INSTANTIATE_TEST_SUITE_P(
    Shapes, KvAttentionTest,
    ::testing::Values(Case{64, 8, 2, 0, 40, 0, 1, 4, 4, 4, 4},      // decode, K4V4
                      Case{64, 8, 2, 0, 300, 0, 1, 8, 8, 3, 3},     // K8V3
                      Case{64, 4, 4, 5, 70, 9, 17, 3, 3, 2, 2},     // all spans, K3V2
                      Case{64, 8, 2, 0, 257, 0, 257, 4, 3, 3, 2},   // prefill, K3.5V2.5
                      Case{128, 8, 1, 3, 100, 20, 33, 8, 8, 4, 3},  // K8 V3.5, head_dim 128
                      Case{256, 4, 2, 0, 65, 4, 5, 4, 4, 3, 3},     // scale groups of 128
                      Case{96, 6, 3, 2, 50, 0, 3, 4, 4, 4, 4},      // head_dim 96: 3 units
                      Case{80, 4, 2, 1, 30, 2, 4, 4, 3, 3, 3},      // head_dim 80: portable path
                      Case{64, 32, 8, 0, 1000, 0, 1, 2, 2, 3, 3},   // decode, K2, 1000 coded
                      Case{128, 8, 2, 0, 77, 0, 1, 3, 3, 3, 3},     // K3 at head_dim 128
                      Case{64, 8, 8, 2, 45, 3, 40, 8, 8, 4, 4},     // prefill rows, K8
                      // QJL sketches (keys at b-1 bits: 1, 1.5, 2, 3), decode and prefill.
                      Case{64, 8, 2, 0, 300, 0, 1, 3, 3, 3, 3, true},
                      Case{64, 8, 2, 0, 130, 0, 1, 1, 1, 4, 4, true},
                      Case{64, 4, 4, 5, 70, 9, 17, 2, 1, 3, 3, true},
                      Case{64, 8, 2, 0, 257, 0, 257, 2, 2, 3, 3, true},
                      Case{128, 8, 1, 3, 100, 20, 33, 3, 3, 4, 3, true},
                      Case{80, 4, 2, 1, 30, 2, 4, 3, 3, 3, 3, true}));  // portable path

TEST(KvAttention, RejectsBrokenViews) {
  CompressedKvView kv;
  AttentionParams p{2, 1, 64, 0.125f, 0};
  std::vector<float> q(128), out(128);
  EXPECT_THROW(CompressedAttention(q.data(), 1, 0, kv, p, out.data()), Error);
}

TEST(KvAttention, QjlTermMovesScoresAndMissingSketchesAreRejected) {
  // With sketches the output differs from the same view without them (the term is applied),
  // and a QJL matrix whose coded span has no sketches is an error, not a read of null.
  const Case with{64, 8, 2, 0, 40, 0, 1, 3, 3, 4, 4, true};
  Case without = with;
  without.qjl = false;
  SetKvInt8Scoring(false);
  std::vector<float> a, b;
  EXPECT_LT(CpuVsRefNmse(with, &a), 1e-9);
  EXPECT_LT(CpuVsRefNmse(without, &b), 1e-9);
  SetKvInt8Scoring(true);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff += (a[i] - b[i]) * double(a[i] - b[i]), norm += b[i] * double(b[i]);
  EXPECT_GT(diff / norm, 1e-4);
  CompressedKvView kv;
  const auto r = quant::HadamardRotation::Make(64, 1, 64);
  const std::vector<float> u8 = Uniform8();
  kv.k_rotation = kv.v_rotation = &r;
  kv.k_format = kv.v_format = MakeFormat(64, 4, 4, u8);
  std::vector<uint8_t> codes(64 * 32);
  std::vector<uint16_t> sc(64, F32ToF16(1.0f));
  kv.num_spans = 1;
  kv.spans[0].end = kv.spans[0].head_stride = 64;
  kv.spans[0].coded = true;
  kv.spans[0].k_codes = kv.spans[0].v_codes = codes.data();
  kv.spans[0].k_scales = kv.spans[0].v_scales = sc.data();
  std::vector<float> s(64 * 64, 1.0f), q(128, 1.0f), out(128);
  kv.qjl_matrix = s.data();
  kv.qjl_m = 64;
  AttentionParams p{2, 1, 64, 0.125f, 0};
  EXPECT_THROW(CompressedAttention(q.data(), 1, 63, kv, p, out.data()), Error);
}

}  // namespace
}  // namespace tq::kernels
