// The newer families' ops on the CUDA backend (family_ops.cu) against the scalar oracle (the ref
// backend), through the Backend interface, on "cuda" (a GPU) and "emu" (the same kernels on the
// host emulator): odd sizes, one token and several, the recurrent ops' state carried across
// calls, the attention variant on every cache dtype with soft-capping, sinks, windows and GQA.
// Bounds are NMSE against the oracle (fp32 arithmetic against double: ~1e-13; a wrong index,
// gate or state update gives > 1e-4); every comparison lands in the table printed at exit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "cuda_test_util.h"
#include "kernels/activation_ops.h"
#include "kernels/attention_variant_ops.h"
#include "kernels/recurrent_ops.h"

namespace tq::kernels {
namespace {

using test::Down;
using test::Expect;
using test::Poisoned;
using test::Up;

constexpr double kBound = 1e-10;     // elementwise, norms, RoPE (fp32 vs double)
constexpr double kLongBound = 1e-8;  // softmax and recurrences over many terms / tokens

std::vector<float> Random(int64_t n, uint64_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

Backend& Ref() { return GetBackend("ref"); }

class CudaFamilyOps : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, CudaFamilyOps, ::testing::ValuesIn(test::kCudaKinds),
                         [](const auto& info) { return info.param; });

TEST_P(CudaFamilyOps, Elementwise) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (int64_t n : {1, 37, 4097}) {
    const std::string what = fmt::format("n={}", n);
    const auto a = Random(n, 1, 3.0f), b = Random(n, 2, 3.0f);
    auto da = Up(*gpu, a), db = Up(*gpu, b);
    auto run = [&](const char* op, auto&& on_ref, auto&& on_gpu) {
      std::vector<float> want(a.size());
      on_ref(want.data());
      auto dy = Poisoned<float>(*gpu, a.size());
      on_gpu(dy.as<float>());
      Expect(op, what, Down<float>(*gpu, dy, a.size()), want, kBound);
    };
    run(
        "GeluTanhMul", [&](float* y) { Ref().GeluTanhMul(a.data(), b.data(), n, y); },
        [&](float* y) { gpu->GeluTanhMul(da.as<float>(), db.as<float>(), n, y); });
    const ClampedSwigluParams cp{1.702f, 2.5f};  // a limit the data crosses both ways
    run(
        "ClampedSwiglu", [&](float* y) { Ref().ClampedSwiglu(a.data(), b.data(), n, cp, y); },
        [&](float* y) { gpu->ClampedSwiglu(da.as<float>(), db.as<float>(), n, cp, y); });
    run(
        "Relu2", [&](float* y) { Ref().Relu2(a.data(), n, y); },
        [&](float* y) { gpu->Relu2(da.as<float>(), n, y); });
    // In place: Scale, Softcap.
    auto in_place = [&](const char* op, auto&& on_ref, auto&& on_gpu) {
      std::vector<float> want = a;
      on_ref(want.data());
      auto dx = Up(*gpu, a);
      on_gpu(dx.as<float>());
      Expect(op, what, Down<float>(*gpu, dx, a.size()), want, kBound);
    };
    in_place(
        "Scale", [&](float* x) { Ref().Scale(x, n, 0.125f); },
        [&](float* x) { gpu->Scale(x, n, 0.125f); });
    in_place(
        "Softcap", [&](float* x) { Ref().Softcap(x, n, 2.0f); },
        [&](float* x) { gpu->Softcap(x, n, 2.0f); });
  }
}

// MLA's per-head product: one token and several, odd sizes, strided rows (the poisoned
// channels past `out` must survive).
TEST_P(CudaFamilyOps, HeadMatMul) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (int64_t n : {1, 5}) {
    for (const auto& [heads, in, out] :
         {std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{3, 37, 9},
          std::array<int64_t, 3>{4, 128, 64}}) {
      const HeadMatMulParams p{heads, in, out, in + 2, out + 3};
      const auto x = Random(n * heads * p.x_stride, 11), w = Random(heads * out * in, 12, 0.2f);
      std::vector<float> want(size_t(n * heads * p.y_stride), 5.0f);
      Ref().HeadMatMul(x.data(), n, w.data(), p, want.data());
      auto dx = Up(*gpu, x), dw = Up(*gpu, w), dy = Up(*gpu, std::vector<float>(want.size(), 5.0f));
      gpu->HeadMatMul(dx.as<float>(), n, dw.as<float>(), p, dy.as<float>());
      Expect("HeadMatMul", fmt::format("n={} heads={} in={} out={}", n, heads, in, out),
             Down<float>(*gpu, dy, want.size()), want, kBound);
    }
  }
}

TEST_P(CudaFamilyOps, GatesNormsAndPartialRope) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  for (int64_t rows : {1, 5}) {
    for (int64_t dim : {7, 96, 1000}) {
      const std::string what = fmt::format("rows={} dim={}", rows, dim);
      const auto x = Random(rows * dim, 3, 2.0f), g = Random(rows, 4, 2.0f);
      std::vector<float> want = x;
      Ref().SigmoidGateRows(want.data(), g.data(), rows, dim);
      auto dx = Up(*gpu, x), dg = Up(*gpu, g);
      gpu->SigmoidGateRows(dx.as<float>(), dg.as<float>(), rows, dim);
      Expect("SigmoidGateRows", what, Down<float>(*gpu, dx, x.size()), want, kBound);
      // Gated RMSNorm over groups of dim / 2 or dim (odd dims: dim), both gate orders.
      const auto z = Random(rows * dim, 5, 2.0f), w = Random(dim, 6, 1.0f, 1.0f);
      auto dz = Up(*gpu, z), dw = Up(*gpu, w);
      dx = Up(*gpu, x);
      for (int64_t group : {dim, dim % 2 ? dim : dim / 2}) {
        for (bool gate_first : {false, true}) {
          std::vector<float> want_n(x.size());
          Ref().GatedRmsNorm(x.data(), rows, dim, group, z.data(), w.data(), 1e-5f, gate_first,
                             want_n.data());
          auto dy = Poisoned<float>(*gpu, x.size());
          gpu->GatedRmsNorm(dx.as<float>(), rows, dim, group, dz.as<float>(), dw.as<float>(), 1e-5f,
                            gate_first, dy.as<float>());
          Expect("GatedRmsNorm",
                 fmt::format("{} group={}{}", what, group, gate_first ? " gate first" : ""),
                 Down<float>(*gpu, dy, x.size()), want_n, kBound);
        }
      }
    }
  }
  // SsmDt and DeltaNetGates: rows a stride apart.
  for (int64_t n : {1, 9}) {
    const int64_t heads = 6, stride = 11;
    const auto dt = Random(n * stride, 7, 8.0f), a = Random(n * stride, 8, 8.0f);
    const auto bias = Random(heads, 9), a_log = Random(heads, 10, 0.5f);
    std::vector<float> want(size_t(n * heads)), want_g(want.size()), want_b(want.size());
    Ref().SsmDt(dt.data(), stride, n, heads, bias.data(), 0.001f, 4.0f, want.data());
    Ref().DeltaNetGates(dt.data(), a.data(), stride, n, heads, a_log.data(), bias.data(),
                        want_g.data(), want_b.data());
    auto ddt = Up(*gpu, dt), da = Up(*gpu, a), dbias = Up(*gpu, bias), dal = Up(*gpu, a_log);
    auto dy = Poisoned<float>(*gpu, want.size()), dg = Poisoned<float>(*gpu, want.size()),
         db = Poisoned<float>(*gpu, want.size());
    gpu->SsmDt(ddt.as<float>(), stride, n, heads, dbias.as<float>(), 0.001f, 4.0f, dy.as<float>());
    gpu->DeltaNetGates(ddt.as<float>(), da.as<float>(), stride, n, heads, dal.as<float>(),
                       dbias.as<float>(), dg.as<float>(), db.as<float>());
    const std::string what = fmt::format("n={} heads={}", n, heads);
    Expect("SsmDt", what, Down<float>(*gpu, dy, want.size()), want, kBound);
    Expect("DeltaNetGates g", what, Down<float>(*gpu, dg, want.size()), want_g, kBound);
    Expect("DeltaNetGates beta", what, Down<float>(*gpu, db, want.size()), want_b, kBound);
  }
  // Partial RoPE: the first rotary_dim channels of each head turn, the rest pass through.
  for (int64_t rotary : {0, 16, 64}) {
    const int64_t rows = 3, heads = 4, hd = 64;
    const auto x = Random(rows * heads * hd, 11);
    std::vector<int64_t> pos = {0, 7, 40000};
    std::vector<float> inv(size_t(std::max<int64_t>(rotary / 2, 1)));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.0f, -2.0f * i / float(rotary));
    std::vector<float> want = x;
    Ref().PartialRope(want.data(), rows, heads, hd, rotary, pos.data(), inv.data(), 1.0f);
    auto dx = Up(*gpu, x), dp = Up(*gpu, pos), di = Up(*gpu, inv);
    gpu->PartialRope(dx.as<float>(), rows, heads, hd, rotary, dp.as<int64_t>(), di.as<float>(),
                     1.0f);
    Expect("PartialRope", fmt::format("rotary={} of {}", rotary, hd),
           Down<float>(*gpu, dx, x.size()), want, kBound);
  }
}

TEST_P(CudaFamilyOps, AttentionVariant) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  struct S {
    int64_t heads, kv_heads, hd, pos0, n, window;
    float softcap;
    bool sinks;
  };
  for (const S s : {S{4, 2, 32, 0, 5, 0, 0.0f, false}, S{4, 1, 64, 20, 1, 0, 30.0f, false},
                    S{8, 2, 64, 9, 3, 4, 0.0f, true}, S{2, 2, 256, 40, 2, 16, 50.0f, true}}) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const int64_t slots = s.pos0 + s.n + 3, stride = slots * s.hd;
      auto k = Random(s.kv_heads * stride, 12), v = Random(s.kv_heads * stride, 13);
      for (std::vector<float>* c : {&k, &v})  // the cache holds values of its dtype
        for (float& f : *c)
          f = dt == DType::F16    ? F16ToF32(F32ToF16(f))
              : dt == DType::BF16 ? Bf16ToF32(F32ToBf16(f))
                                  : f;
      const auto q = Random(s.n * s.heads * s.hd, 14, 2.0f), sinks = Random(s.heads, 15);
      SinkAttentionParams p;
      p.num_heads = s.heads;
      p.num_kv_heads = s.kv_heads;
      p.head_dim = p.v_head_dim = s.hd;
      p.scale = 1.0f / std::sqrt(float(s.hd));
      p.window = s.window;
      p.softcap = s.softcap;
      p.sinks = s.sinks ? sinks.data() : nullptr;
      std::vector<float> want(size_t(s.n * s.heads * s.hd));
      Ref().AttentionVariant(q.data(), s.n, s.pos0, KvView{k.data(), v.data(), DType::F32, stride},
                             p, want.data());
      auto to_bytes = [&](const std::vector<float>& src) {
        std::vector<uint8_t> b(src.size() * DTypeSize(dt));
        for (size_t i = 0; i < src.size(); ++i) {
          if (dt == DType::F32) {
            std::memcpy(b.data() + 4 * i, &src[i], 4);
          } else {
            const uint16_t h = dt == DType::F16 ? F32ToF16(src[i]) : F32ToBf16(src[i]);
            std::memcpy(b.data() + 2 * i, &h, 2);
          }
        }
        return b;
      };
      auto dk = Up(*gpu, to_bytes(k)), dv = Up(*gpu, to_bytes(v)), dq = Up(*gpu, q),
           ds = Up(*gpu, sinks);
      auto dy = Poisoned<float>(*gpu, want.size());
      p.sinks = s.sinks ? ds.as<float>() : nullptr;
      gpu->AttentionVariant(dq.as<float>(), s.n, s.pos0, KvView{dk.data(), dv.data(), dt, stride},
                            p, dy.as<float>());
      Expect("AttentionVariant",
             fmt::format("{}/{}x{} pos0={} n={} win={} cap={} sinks={} {}", s.heads, s.kv_heads,
                         s.hd, s.pos0, s.n, s.window, s.softcap, s.sinks, DTypeName(dt)),
             Down<float>(*gpu, dy, want.size()), want, kLongBound);
    }
  }
}

TEST_P(CudaFamilyOps, RecurrentOpsCarryTheirState) {
  TQ_REQUIRE_BACKEND(gpu, GetParam());
  // Each op: a prompt of 7 tokens in one call, then 2 more tokens one at a time, against the ref
  // backend doing the same (the state is the op's, in place, across calls).
  const std::vector<int64_t> chunks = {7, 1, 1};
  {  // causal conv1d, x a slice of a wider row
    for (int64_t K : {1, 4}) {
      const int64_t C = 37, stride = 45, n = 9;
      const auto x = Random(n * stride, 16), w = Random(C * K, 17), b = Random(C, 18);
      std::vector<float> sr(size_t((K - 1) * C), 0.5f), yr(size_t(n * C));
      auto ds = Up(*gpu, sr), dx = Up(*gpu, x), dw = Up(*gpu, w), db = Up(*gpu, b);
      auto dy = Poisoned<float>(*gpu, yr.size());
      int64_t t0 = 0;
      for (int64_t c : chunks) {
        const Conv1dParams p{C, K, true};
        Ref().CausalConv1d(x.data() + t0 * stride, c, stride, w.data(), b.data(), sr.data(), p,
                           yr.data() + t0 * C);
        gpu->CausalConv1d(dx.as<float>() + t0 * stride, c, stride, dw.as<float>(), db.as<float>(),
                          ds.as<float>(), p, dy.as<float>() + t0 * C);
        t0 += c;
      }
      const std::string what = fmt::format("C={} K={} n={}", C, K, n);
      Expect("CausalConv1d", what, Down<float>(*gpu, dy, yr.size()), yr, kBound);
      if (K > 1) Expect("CausalConv1d state", what, Down<float>(*gpu, ds, sr.size()), sr, kBound);
    }
  }
  {  // Gated DeltaNet: 2 key heads, 4 value heads (GQA), dk 16, dv 40
    DeltaNetParams p;
    p.num_k_heads = 2, p.num_v_heads = 4, p.k_dim = 16, p.v_dim = 40;
    p.q_stride = p.k_stride = 2 * 16 + 3, p.v_stride = 4 * 40 + 1;
    p.scale = 0.25f;
    const int64_t n = 9, hv = p.num_v_heads;
    const auto q = Random(n * p.q_stride, 19), k = Random(n * p.k_stride, 20),
               v = Random(n * p.v_stride, 21), beta = Random(n * hv, 22, 0.2f, 0.5f);
    auto g = Random(n * hv, 23, 0.3f);
    for (float& x : g) x = -std::fabs(x);  // log decays
    std::vector<float> sr(size_t(hv * p.k_dim * p.v_dim), 0.0f), yr(size_t(n * hv * p.v_dim));
    auto ds = Up(*gpu, sr), dq = Up(*gpu, q), dk = Up(*gpu, k), dv = Up(*gpu, v), dg = Up(*gpu, g),
         db = Up(*gpu, beta);
    auto dy = Poisoned<float>(*gpu, yr.size());
    int64_t t0 = 0;
    for (int64_t c : chunks) {
      Ref().GatedDeltaNet(q.data() + t0 * p.q_stride, k.data() + t0 * p.k_stride,
                          v.data() + t0 * p.v_stride, g.data() + t0 * hv, beta.data() + t0 * hv, c,
                          sr.data(), p, yr.data() + t0 * hv * p.v_dim);
      gpu->GatedDeltaNet(dq.as<float>() + t0 * p.q_stride, dk.as<float>() + t0 * p.k_stride,
                         dv.as<float>() + t0 * p.v_stride, dg.as<float>() + t0 * hv,
                         db.as<float>() + t0 * hv, c, ds.as<float>(), p,
                         dy.as<float>() + t0 * hv * p.v_dim);
      t0 += c;
    }
    Expect("GatedDeltaNet", "Hk=2 Hv=4 dk=16 dv=40 n=7+1+1", Down<float>(*gpu, dy, yr.size()), yr,
           kLongBound);
    Expect("GatedDeltaNet state", "after 9 tokens", Down<float>(*gpu, ds, sr.size()), sr,
           kLongBound);
  }
  {  // Mamba-2 scan: 4 heads in 2 groups, P 24, N 16
    SsdParams p;
    p.num_heads = 4, p.head_dim = 24, p.state_size = 16, p.n_groups = 2;
    p.x_stride = 4 * 24 + 5, p.bc_stride = 2 * 16 + 2;
    const int64_t n = 9, H = p.num_heads;
    const auto x = Random(n * p.x_stride, 24), B = Random(n * p.bc_stride, 25),
               C = Random(n * p.bc_stride, 26), D = Random(H, 27);
    auto dt = Random(n * H, 28, 0.1f, 0.3f), A = Random(H, 29);
    for (float& a : A) a = -std::fabs(a);
    for (float& d : dt) d = std::fabs(d);
    std::vector<float> sr(size_t(H * p.head_dim * p.state_size), 0.0f), yr(size_t(n * H * 24));
    auto ds = Up(*gpu, sr), dx = Up(*gpu, x), dB = Up(*gpu, B), dC = Up(*gpu, C), dD = Up(*gpu, D),
         ddt = Up(*gpu, dt), dA = Up(*gpu, A);
    auto dy = Poisoned<float>(*gpu, yr.size());
    int64_t t0 = 0;
    for (int64_t c : chunks) {
      Ref().Ssd(x.data() + t0 * p.x_stride, B.data() + t0 * p.bc_stride,
                C.data() + t0 * p.bc_stride, dt.data() + t0 * H, A.data(), D.data(), c, sr.data(),
                p, yr.data() + t0 * H * p.head_dim);
      gpu->Ssd(dx.as<float>() + t0 * p.x_stride, dB.as<float>() + t0 * p.bc_stride,
               dC.as<float>() + t0 * p.bc_stride, ddt.as<float>() + t0 * H, dA.as<float>(),
               dD.as<float>(), c, ds.as<float>(), p, dy.as<float>() + t0 * H * p.head_dim);
      t0 += c;
    }
    Expect("Ssd", "H=4 G=2 P=24 N=16 n=7+1+1", Down<float>(*gpu, dy, yr.size()), yr, kLongBound);
    Expect("Ssd state", "after 9 tokens", Down<float>(*gpu, ds, sr.size()), sr, kLongBound);
  }
}

}  // namespace
}  // namespace tq::kernels
