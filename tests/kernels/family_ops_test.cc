// The new families' ops: every cpu path against its scalar reference on awkward sizes (1 token,
// odd dims, chunk boundaries), hand-computed cases that pin the references themselves, and the
// state contract of the recurrent ops (any split of a prompt into chunks, or token-by-token
// decode, gives what one pass gives).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/activation_ops.h"
#include "kernels/attention_variant_ops.h"
#include "kernels/backend.h"
#include "kernels/recurrent_ops.h"

namespace tq::kernels {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// max |a - b| / max(|b|, 1e-6).
double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1e-6, err = 0;
  for (float x : b) scale = std::max(scale, double(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, double(std::fabs(a[i] - b[i])));
  return err / scale;
}

// ---------------------------------------------------------------- conv1d

TEST(CausalConv1d, CpuMatchesRefAndStateCarries) {
  for (int64_t C : {1, 7, 37, 192}) {
    for (int64_t K : {1, 2, 4}) {
      for (int64_t n : {1, 3, 17}) {
        for (bool silu : {false, true}) {
          SCOPED_TRACE(testing::Message() << "C=" << C << " K=" << K << " n=" << n);
          const int64_t stride = C + 5;  // a slice of a wider row
          const auto x = Random(n * stride, C * 31 + K);
          const auto w = Random(C * K, 2);
          const auto bias = Random(C, 3);
          const auto s0 = Random((K - 1) * C, 4);
          const Conv1dParams p{C, K, silu};
          std::vector<float> sr = s0, sc = s0, yr(size_t(n * C)), yc(yr.size(), NAN);
          ref::CausalConv1d(x.data(), n, stride, w.data(), bias.data(), sr.data(), p, yr.data());
          cpu::CausalConv1d(x.data(), n, stride, w.data(), bias.data(), sc.data(), p, yc.data());
          EXPECT_LT(RelErr(yc, yr), 1e-6);
          EXPECT_EQ(sc, sr);
          // Token by token equals one pass.
          std::vector<float> st = s0, yt(size_t(n * C));
          for (int64_t t = 0; t < n; ++t)
            cpu::CausalConv1d(x.data() + t * stride, 1, stride, w.data(), bias.data(), st.data(), p,
                              yt.data() + t * C);
          EXPECT_LT(RelErr(yt, yr), 1e-6);
          EXPECT_EQ(st, sr);
        }
      }
    }
  }
}

TEST(CausalConv1d, HandComputed) {
  // C = 1, K = 3, w = [1, 10, 100], zero state: y_t = 100 x_t + 10 x_{t-1} + x_{t-2}.
  const float w[] = {1, 10, 100}, x[] = {1, 2, 3};
  float state[2] = {0, 0}, y[3];
  ref::CausalConv1d(x, 3, 1, w, nullptr, state, {1, 3, false}, y);
  EXPECT_FLOAT_EQ(y[0], 100);
  EXPECT_FLOAT_EQ(y[1], 210);
  EXPECT_FLOAT_EQ(y[2], 321);
  EXPECT_FLOAT_EQ(state[0], 2);
  EXPECT_FLOAT_EQ(state[1], 3);
}

// ---------------------------------------------------------------- Gated DeltaNet

struct DnCase {
  int64_t hk, hv, dk, dv, n, chunk;
};

class DeltaNetConformance : public ::testing::TestWithParam<DnCase> {};

TEST_P(DeltaNetConformance, CpuMatchesRef) {
  const DnCase c = GetParam();
  DeltaNetParams p;
  p.num_k_heads = c.hk;
  p.num_v_heads = c.hv;
  p.k_dim = c.dk;
  p.v_dim = c.dv;
  p.q_stride = p.k_stride = c.hk * c.dk + 3;
  p.v_stride = c.hv * c.dv + 1;
  p.scale = 1.0f / std::sqrt(float(c.dk));
  p.chunk = c.chunk;
  const auto q = Random(c.n * p.q_stride, 1), k = Random(c.n * p.k_stride, 2);
  const auto v = Random(c.n * p.v_stride, 3);
  auto g = Random(c.n * c.hv, 4, 0.5f, -0.3f);
  for (float& x : g) x = -std::fabs(x);  // log decay <= 0
  auto beta = Random(c.n * c.hv, 5);
  for (float& x : beta) x = 1.0f / (1.0f + std::exp(-x));
  const auto s0 = Random(c.hv * c.dk * c.dv, 6, 0.3f);
  std::vector<float> sr = s0, sc = s0, yr(size_t(c.n * c.hv * c.dv)), yc(yr.size(), NAN);
  ref::GatedDeltaNet(q.data(), k.data(), v.data(), g.data(), beta.data(), c.n, sr.data(), p,
                     yr.data());
  cpu::GatedDeltaNet(q.data(), k.data(), v.data(), g.data(), beta.data(), c.n, sc.data(), p,
                     yc.data());
  EXPECT_LT(RelErr(yc, yr), 2e-5);
  EXPECT_LT(RelErr(sc, sr), 2e-5);

  // Prompt in two uneven pieces, then the rest token by token: same outputs, same state.
  std::vector<float> ss = s0, ys(yr.size());
  const int64_t a = c.n / 3;
  auto run = [&](int64_t t0, int64_t m) {
    cpu::GatedDeltaNet(q.data() + t0 * p.q_stride, k.data() + t0 * p.k_stride,
                       v.data() + t0 * p.v_stride, g.data() + t0 * c.hv, beta.data() + t0 * c.hv, m,
                       ss.data(), p, ys.data() + t0 * c.hv * c.dv);
  };
  if (a > 0) run(0, a);
  const int64_t b = (c.n - a) / 2;
  if (b > 0) run(a, b);
  for (int64_t t = a + b; t < c.n; ++t) run(t, 1);
  EXPECT_LT(RelErr(ys, yr), 2e-5);
  EXPECT_LT(RelErr(ss, sr), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaNetConformance,
                         ::testing::Values(DnCase{1, 1, 5, 3, 1, 64}, DnCase{1, 1, 5, 3, 9, 4},
                                           DnCase{2, 4, 32, 32, 65, 64},
                                           DnCase{2, 6, 17, 13, 130, 16},
                                           DnCase{1, 2, 8, 24, 64, 64},
                                           DnCase{3, 3, 16, 8, 33, 7}));

TEST(DeltaNet, HandComputed) {
  // dk = dv = 1, no normalisation: S = 0 -> (g 0, β 1, k 1, v 2): S = 2, o = 2;
  // then (g ln .5, β .5, k 1, v 0): S = 1, δ = -.5, S = .5, o = .5.
  DeltaNetParams p;
  p.num_k_heads = p.num_v_heads = p.k_dim = p.v_dim = 1;
  p.q_stride = p.k_stride = p.v_stride = 1;
  p.qk_l2norm = false;
  const float q[] = {1, 1}, k[] = {1, 1}, v[] = {2, 0}, g[] = {0, std::log(0.5f)},
              beta[] = {1, 0.5f};
  float s = 0, o[2];
  ref::GatedDeltaNet(q, k, v, g, beta, 2, &s, p, o);
  EXPECT_FLOAT_EQ(o[0], 2);
  EXPECT_FLOAT_EQ(o[1], 0.5f);
  EXPECT_FLOAT_EQ(s, 0.5f);
  float s2 = 0, o2[2];
  cpu::GatedDeltaNet(q, k, v, g, beta, 2, &s2, p, o2);
  EXPECT_FLOAT_EQ(o2[1], 0.5f);
}

// ---------------------------------------------------------------- Mamba-2 SSD

struct SsdCase {
  int64_t h, p, ns, g, n, chunk;
  bool d;
};

class SsdConformance : public ::testing::TestWithParam<SsdCase> {};

TEST_P(SsdConformance, CpuMatchesRef) {
  const SsdCase c = GetParam();
  SsdParams p;
  p.num_heads = c.h;
  p.head_dim = c.p;
  p.state_size = c.ns;
  p.n_groups = c.g;
  p.x_stride = c.h * c.p + 2;
  p.bc_stride = c.g * c.ns * 2 + 1;  // B and C slices of one row
  p.chunk = c.chunk;
  const auto x = Random(c.n * p.x_stride, 1);
  const auto bc = Random(c.n * p.bc_stride, 2);
  const float* B = bc.data();
  const float* C = bc.data() + c.g * c.ns;
  auto dt = Random(c.n * c.h, 3, 0.5f);
  for (float& d : dt) d = std::log1p(std::exp(d));  // softplus
  auto A = Random(c.h, 4);
  for (float& a : A) a = -std::exp(a);
  const auto D = Random(c.h, 5);
  const float* Dp = c.d ? D.data() : nullptr;
  const auto s0 = Random(c.h * c.p * c.ns, 6, 0.3f);
  std::vector<float> sr = s0, sc = s0, yr(size_t(c.n * c.h * c.p)), yc(yr.size(), NAN);
  ref::Ssd(x.data(), B, C, dt.data(), A.data(), Dp, c.n, sr.data(), p, yr.data());
  cpu::Ssd(x.data(), B, C, dt.data(), A.data(), Dp, c.n, sc.data(), p, yc.data());
  EXPECT_LT(RelErr(yc, yr), 2e-5);
  EXPECT_LT(RelErr(sc, sr), 2e-5);

  std::vector<float> ss = s0, ys(yr.size());
  const int64_t a = c.n / 2;
  if (a > 0) cpu::Ssd(x.data(), B, C, dt.data(), A.data(), Dp, a, ss.data(), p, ys.data());
  for (int64_t t = a; t < c.n; ++t)
    cpu::Ssd(x.data() + t * p.x_stride, B + t * p.bc_stride, C + t * p.bc_stride,
             dt.data() + t * c.h, A.data(), Dp, 1, ss.data(), p, ys.data() + t * c.h * c.p);
  EXPECT_LT(RelErr(ys, yr), 2e-5);
  EXPECT_LT(RelErr(ss, sr), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdConformance,
                         ::testing::Values(SsdCase{1, 1, 1, 1, 1, 64, true},
                                           SsdCase{8, 16, 16, 2, 33, 16, true},
                                           SsdCase{6, 7, 5, 3, 70, 32, false},
                                           SsdCase{4, 64, 128, 1, 17, 8, true},
                                           SsdCase{2, 3, 9, 2, 128, 64, true}));

TEST(Ssd, HandComputed) {
  // P = N = 1, zero state, dt 1, A ln .5 (a = .5), x 2, B 1, C 1, D 3: h = 2, y = 2 + 6;
  // next x 0: h = 1, y = 1.
  SsdParams p;
  p.num_heads = p.head_dim = p.state_size = p.n_groups = 1;
  p.x_stride = p.bc_stride = 1;
  const float x[] = {2, 0}, B[] = {1, 1}, C[] = {1, 1}, dt[] = {1, 1}, A[] = {std::log(0.5f)},
              D[] = {3};
  float s = 0, y[2];
  ref::Ssd(x, B, C, dt, A, D, 2, &s, p, y);
  EXPECT_FLOAT_EQ(y[0], 8);
  EXPECT_FLOAT_EQ(y[1], 1);
}

// ---------------------------------------------------------------- activations

TEST(FamilyActivations, CpuMatchesRef) {
  for (int64_t n : {1, 17, 40000}) {
    SCOPED_TRACE(n);
    const auto a = Random(n, 1, 4.0f), b = Random(n, 2, 4.0f);
    std::vector<float> r(static_cast<size_t>(n)), c(static_cast<size_t>(n));
    ref::GeluTanhMul(a.data(), b.data(), n, r.data());
    cpu::GeluTanhMul(a.data(), b.data(), n, c.data());
    EXPECT_LT(RelErr(c, r), 1e-6);
    ref::Relu2(a.data(), n, r.data());
    cpu::Relu2(a.data(), n, c.data());
    EXPECT_LT(RelErr(c, r), 1e-6);
    ref::ClampedSwiglu(a.data(), b.data(), n, {}, r.data());
    cpu::ClampedSwiglu(a.data(), b.data(), n, {}, c.data());
    EXPECT_LT(RelErr(c, r), 1e-6);
    r = a;
    c = a;
    ref::Softcap(r.data(), n, 3.0f);
    cpu::Softcap(c.data(), n, 3.0f);
    EXPECT_LT(RelErr(c, r), 1e-6);
  }
}

TEST(FamilyActivations, HandComputed) {
  float x[] = {-1, 3}, y[2];
  ref::Relu2(x, 2, y);
  EXPECT_FLOAT_EQ(y[0], 0);
  EXPECT_FLOAT_EQ(y[1], 9);
  // gelu_tanh(1) = 0.841192 (torch's gelu(approximate="tanh")).
  const float g = 1, u = 1;
  ref::GeluTanhMul(&g, &u, 1, y);
  EXPECT_NEAR(y[0], 0.841192f, 1e-6);
  // Clamps: gate 100 -> 7 · sigmoid(11.914) ≈ 7; up 100 -> 7, × (7 + 1).
  const float big = 100;
  ref::ClampedSwiglu(&big, &big, 1, {}, y);
  EXPECT_NEAR(y[0], 56.0f, 1e-3);
  const float neg_up = -100;
  ref::ClampedSwiglu(&g, &neg_up, 1, {}, y);
  EXPECT_NEAR(y[0], 1.0f / (1.0f + std::exp(-1.702f)) * -6.0f, 1e-6);
  float s[] = {1000, -1000, 0.5f};
  cpu::Softcap(s, 3, 30);
  EXPECT_FLOAT_EQ(s[0], 30);
  EXPECT_FLOAT_EQ(s[1], -30);
  EXPECT_NEAR(s[2], 30 * std::tanh(0.5f / 30), 1e-6);
}

// ---------------------------------------------------------------- attention variants

struct AttnCase {
  int64_t h, hkv, d, dv, n, pos0, window;
  float softcap;
  bool sinks;
};

class SinkAttentionConformance : public ::testing::TestWithParam<AttnCase> {};

TEST_P(SinkAttentionConformance, CpuMatchesRef) {
  const AttnCase c = GetParam();
  const int64_t T = c.pos0 + c.n, cap = T + 3;
  SinkAttentionParams p;
  p.num_heads = c.h;
  p.num_kv_heads = c.hkv;
  p.head_dim = c.d;
  p.v_head_dim = c.dv;
  p.k_head_stride = cap * c.d;
  p.v_head_stride = cap * c.dv;
  p.scale = 1.0f / std::sqrt(float(c.d));
  p.window = c.window;
  p.softcap = c.softcap;
  const auto sinks = Random(c.h, 9, 2.0f);
  p.sinks = c.sinks ? sinks.data() : nullptr;
  const auto q = Random(c.n * c.h * c.d, 1, 2.0f);
  const auto k = Random(c.hkv * cap * c.d, 2), v = Random(c.hkv * cap * c.dv, 3);
  std::vector<float> r(size_t(c.n * c.h * c.dv)), o(r.size(), NAN);
  ref::AttentionSinkSoftcap(q.data(), c.n, c.pos0, k.data(), v.data(), p, r.data());
  cpu::AttentionSinkSoftcap(q.data(), c.n, c.pos0, k.data(), v.data(), p, o.data());
  EXPECT_LT(RelErr(o, r), 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SinkAttentionConformance,
                         ::testing::Values(AttnCase{1, 1, 1, 1, 1, 0, 0, 0, true},
                                           AttnCase{4, 2, 32, 32, 7, 5, 0, 50, false},
                                           AttnCase{4, 2, 32, 32, 9, 20, 8, 0, true},
                                           AttnCase{6, 3, 17, 11, 33, 0, 0, 5, true},
                                           AttnCase{8, 1, 64, 64, 1, 100, 16, 30, true}));

TEST(SinkAttention, SinkAndSoftcapSemantics) {
  // One key: without a sink the output is v; a sink of logit s takes exp(s)/(exp(s)+exp(q·k)).
  const float q[] = {0}, k[] = {0}, v[] = {5}, sink[] = {0};
  SinkAttentionParams p;
  p.num_heads = p.num_kv_heads = p.head_dim = p.v_head_dim = 1;
  p.k_head_stride = p.v_head_stride = 1;
  float o;
  ref::AttentionSinkSoftcap(q, 1, 0, k, v, p, &o);
  EXPECT_FLOAT_EQ(o, 5);
  p.sinks = sink;
  ref::AttentionSinkSoftcap(q, 1, 0, k, v, p, &o);
  EXPECT_FLOAT_EQ(o, 2.5f);  // half the mass on the sink
  cpu::AttentionSinkSoftcap(q, 1, 0, k, v, p, &o);
  EXPECT_FLOAT_EQ(o, 2.5f);
}

// The variants over a plain cache ([kv_heads, slots, head_dim] of F32 / F16 / BF16, as the dense
// KV cache stores it): each backend's AttentionVariant equals the fp32 reference on the same
// (rounded) keys and values.
TEST(SinkAttention, PlainCacheOfEveryDtypeOnBothBackends) {
  const int64_t H = 4, Hkv = 2, d = 16, n = 5, pos0 = 9, slots = 20, T = pos0 + n;
  SinkAttentionParams p;
  p.num_heads = H;
  p.num_kv_heads = Hkv;
  p.head_dim = p.v_head_dim = d;
  p.scale = 0.25f;
  p.window = 6;
  p.softcap = 20;
  const auto sinks = Random(H, 4, 1.0f);
  p.sinks = sinks.data();
  const auto q = Random(n * H * d, 5, 2.0f);
  const auto k = Random(Hkv * slots * d, 6), v = Random(Hkv * slots * d, 7);
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    // The cache in dt, and its fp32 reading (the reference's input).
    std::vector<uint16_t> k16(k.size()), v16(v.size());
    std::vector<float> kr = k, vr = v;
    for (size_t i = 0; i < k.size() && dt != DType::F32; ++i) {
      k16[i] = dt == DType::F16 ? F32ToF16(k[i]) : F32ToBf16(k[i]);
      v16[i] = dt == DType::F16 ? F32ToF16(v[i]) : F32ToBf16(v[i]);
      kr[i] = dt == DType::F16 ? F16ToF32(k16[i]) : Bf16ToF32(k16[i]);
      vr[i] = dt == DType::F16 ? F16ToF32(v16[i]) : Bf16ToF32(v16[i]);
    }
    KvView kv;
    kv.dtype = dt;
    kv.head_stride = slots * d;
    kv.k = dt == DType::F32 ? static_cast<const void*>(k.data()) : k16.data();
    kv.v = dt == DType::F32 ? static_cast<const void*>(v.data()) : v16.data();
    SinkAttentionParams rp = p;
    rp.k_head_stride = rp.v_head_stride = slots * d;
    std::vector<float> want(size_t(n * H * d));
    ref::AttentionSinkSoftcap(q.data(), n, pos0, kr.data(), vr.data(), rp, want.data());
    for (Backend* be : {&RefBackend(), &CpuBackend()}) {
      ASSERT_TRUE(be->SupportsFamilyOp(FamilyOp::kAttentionVariant));
      std::vector<float> got(want.size(), NAN);
      be->AttentionVariant(q.data(), n, pos0, kv, p, got.data());
      EXPECT_LT(RelErr(got, want), 2e-6) << be->name() << " " << DTypeName(dt);
    }
  }
  (void)T;
}

// The small family ops of the backends against their definitions.
TEST(FamilyOps, BackendsScaleGateAndActivate) {
  for (Backend* be : {&RefBackend(), &CpuBackend()}) {
    std::vector<float> x = {1, -2, 3, 4, 5, 6};
    be->Scale(x.data(), 6, 0.5f);
    EXPECT_EQ(x, (std::vector<float>{0.5f, -1, 1.5f, 2, 2.5f, 3}));
    const float g[] = {0.0f, 100.0f};
    be->SigmoidGateRows(x.data(), g, 2, 3);  // row 0 × 0.5, row 1 × ~1
    EXPECT_FLOAT_EQ(x[0], 0.25f);
    EXPECT_FLOAT_EQ(x[5], 3.0f);
    const auto a = Random(37, 11, 2.0f), b = Random(37, 12, 2.0f);
    std::vector<float> got(37), want(37);
    be->GeluTanhMul(a.data(), b.data(), 37, got.data());
    ref::GeluTanhMul(a.data(), b.data(), 37, want.data());
    EXPECT_LT(RelErr(got, want), 1e-6) << be->name();
    be->ClampedSwiglu(a.data(), b.data(), 37, {}, got.data());
    ref::ClampedSwiglu(a.data(), b.data(), 37, {}, want.data());
    EXPECT_LT(RelErr(got, want), 1e-6) << be->name();
  }
}

// The recurrent mixers' elementwise ops (one host loop for ref and cpu), against the formulas
// written out in double here; and partial RoPE against Rope on the rotated slice.
TEST(FamilyOps, RecurrentGatesNormsAndPartialRope) {
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  auto softplus = [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); };
  for (Backend* be : {&RefBackend(), &CpuBackend()}) {
    // DeltaNetGates: b, a interleaved in rows of 2·H (stride), H = 3, n = 2.
    const int64_t H = 3, n = 2;
    const auto ba = Random(n * 2 * H, 21, 3.0f);
    const std::vector<float> a_log = {-0.5f, 0.0f, 1.0f}, dt_bias = {0.1f, -2.0f, 25.0f};
    std::vector<float> g(size_t(n * H)), beta(size_t(n * H));
    be->DeltaNetGates(ba.data(), ba.data() + H, 2 * H, n, H, a_log.data(), dt_bias.data(), g.data(),
                      beta.data());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const double av = ba[size_t(t * 2 * H + H + h)], bv = ba[size_t(t * 2 * H + h)];
        EXPECT_NEAR(g[size_t(t * H + h)],
                    -std::exp(a_log[size_t(h)]) * softplus(av + dt_bias[size_t(h)]), 1e-4);
        EXPECT_NEAR(beta[size_t(t * H + h)], sigmoid(bv), 1e-6);
      }
    // SsmDt with a clamp on both sides.
    std::vector<float> dt(size_t(n * H));
    be->SsmDt(ba.data(), 2 * H, n, H, dt_bias.data(), 0.05f, 3.0f, dt.data());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < H; ++h)
        EXPECT_NEAR(dt[size_t(t * H + h)],
                    std::clamp(softplus(ba[size_t(t * 2 * H + h)] + dt_bias[size_t(h)]), 0.05, 3.0),
                    1e-5);
    // GatedRmsNorm: norm then gate (DeltaNet), and gate then grouped norm (Mamba-2).
    const int64_t rows = 3, dim = 8;
    const auto x = Random(rows * dim, 22), z = Random(rows * dim, 23), w = Random(dim, 24);
    for (bool gate_first : {false, true}) {
      const int64_t group = gate_first ? 4 : dim;
      std::vector<float> got(size_t(rows * dim));
      be->GatedRmsNorm(x.data(), rows, dim, group, z.data(), w.data(), 1e-5f, gate_first,
                       got.data());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g0 = 0; g0 < dim; g0 += group) {
          std::vector<double> u(static_cast<size_t>(group));
          double ss = 0;
          for (int64_t i = 0; i < group; ++i) {
            const size_t j = size_t(r * dim + g0 + i);
            u[size_t(i)] = gate_first ? x[j] * z[j] * sigmoid(z[j]) : x[j];
            ss += u[size_t(i)] * u[size_t(i)];
          }
          const double inv = 1.0 / std::sqrt(ss / double(group) + 1e-5);
          for (int64_t i = 0; i < group; ++i) {
            const size_t j = size_t(r * dim + g0 + i);
            double want = u[size_t(i)] * inv * w[size_t(g0 + i)];
            if (!gate_first) want *= z[j] * sigmoid(z[j]);
            EXPECT_NEAR(got[j], want, 1e-5) << be->name() << " gate_first " << gate_first;
          }
        }
    }
    // Relu2.
    std::vector<float> r2 = {-1.0f, 0.0f, 2.0f, -0.5f, 3.0f};
    be->Relu2(r2.data(), 5, r2.data());
    EXPECT_EQ(r2, (std::vector<float>{0, 0, 4, 0, 9}));
    // PartialRope: the first rd of each head as Rope on [rows, heads, rd]; the rest untouched.
    const int64_t prow = 3, heads = 2, hd = 12, rd = 4;
    const auto q = Random(prow * heads * hd, 25);
    const std::vector<int64_t> pos = {0, 5, 1000};
    const std::vector<float> inv_freq = {1.0f, 0.01f};
    std::vector<float> got = q, slice(size_t(prow * heads * rd));
    be->PartialRope(got.data(), prow, heads, hd, rd, pos.data(), inv_freq.data(), 1.0f);
    for (int64_t r = 0; r < prow * heads; ++r)
      for (int64_t i = 0; i < rd; ++i) slice[size_t(r * rd + i)] = q[size_t(r * hd + i)];
    be->Rope(slice.data(), prow, heads, rd, pos.data(), inv_freq.data(), 1.0f);
    for (int64_t r = 0; r < prow * heads; ++r)
      for (int64_t i = 0; i < hd; ++i) {
        const float want = i < rd ? slice[size_t(r * rd + i)] : q[size_t(r * hd + i)];
        EXPECT_NEAR(got[size_t(r * hd + i)], want, 1e-6) << be->name() << " " << r << "," << i;
      }
  }
}

// HeadMatMul (MLA's absorbed projections): cpu against the scalar reference, the dot-product
// pass (<= 8 tokens) and the per-head GEMM (more), odd sizes, strided rows whose other channels
// stay untouched.
TEST(HeadMatMul, CpuMatchesRef) {
  for (int64_t n : {1, 3, 9, 257}) {
    for (const auto& [heads, in, out] :
         {std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{3, 7, 33},
          std::array<int64_t, 3>{16, 128, 512}, std::array<int64_t, 3>{5, 37, 17}}) {
      const HeadMatMulParams p{heads, in, out, in + 3, out + 5};
      const auto x = Random(n * heads * p.x_stride, 1);
      const auto w = Random(heads * out * in, 2, 0.2f);
      std::vector<float> want(size_t(n * heads * p.y_stride), 7.0f), got = want;
      ref::HeadMatMul(x.data(), n, w.data(), p, want.data());
      GetBackend("cpu").HeadMatMul(x.data(), n, w.data(), p, got.data());
      EXPECT_LT(RelErr(got, want), 1e-5) << n << " " << heads << " " << in << " " << out;
      for (size_t i = 0; i < want.size(); ++i)
        if (int64_t(i) % p.y_stride >= out) ASSERT_EQ(got[i], 7.0f) << "wrote past out at " << i;
    }
  }
}

}  // namespace
}  // namespace tq::kernels
