// Multi-head latent attention in the absorbed form the forward pass runs (model/mla_absorb.h):
// q_lat = W_UK[h]ᵀ q_nope by HeadMatMul, the plain Attention op with every query head on one
// latent KV head (keys [c | k_pe], values [c | 0], head_dim kv_lora + rope), then W_UV[h] by
// HeadMatMul, equals the reference that decompresses every cached latent into per-head keys and
// values (kernels ref::MlaAttention): on ref, cpu and the CUDA sources (the emulator, and the GPU
// where there is one), up to DeepSeek-V2-Lite's shape (head_dim 576 on the GPU's generic kernel).
#include "model/mla_absorb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "cuda_emu/cuda_emu.h"
#include "kernels/attention_variant_ops.h"
#include "kernels/backend.h"
#include "model/linear.h"
#include "testutil/random.h"

namespace tq {
namespace {

using test::RandomNormal;

// On `be`: out [n, H, v] for queries q [n, H, nope + rope] at pos0.. over latents [T, R + rope].
std::vector<float> Absorbed(kernels::Backend& be, const MlaAbsorbed& a, const MlaSpec& m, int64_t H,
                            const std::vector<float>& q, int64_t n, int64_t pos0,
                            const std::vector<float>& lat, float scale) {
  const int64_t R = m.kv_lora_rank, dn = m.nope_dim, dr = m.rope_dim, dv = m.v_dim;
  const int64_t D = R + dr, T = pos0 + n;
  // The query rows [q_lat (written by HeadMatMul) | q_pe]; values [c | 0].
  std::vector<float> qf(size_t(n * H * D), 0.0f), vals(size_t(T * D), 0.0f);
  for (int64_t r = 0; r < n * H; ++r)
    for (int64_t j = 0; j < dr; ++j) qf[size_t(r * D + R + j)] = q[size_t(r * (dn + dr) + dn + j)];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < R; ++j) vals[size_t(t * D + j)] = lat[size_t(t * D + j)];
  auto up = [&](const std::vector<float>& v) {
    DeviceBuffer b = be.Allocate(v.size() * sizeof(float), "mla test");
    be.CopyToDevice(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  DeviceBuffer dq = up(q), dqf = up(qf), dk = up(lat), dvals = up(vals), uk = up(a.uk_t),
               uv = up(a.uv);
  DeviceBuffer attn = be.Allocate(size_t(n * H * D) * sizeof(float), "mla test");
  DeviceBuffer out = be.Allocate(size_t(n * H * dv) * sizeof(float), "mla test");
  be.HeadMatMul(dq.as<float>(), n, uk.as<float>(), {H, dn, R, dn + dr, D}, dqf.as<float>());
  const kernels::KvView kv{dk.data(), dvals.data(), DType::F32, T * D};
  be.Attention(dqf.as<float>(), n, pos0, kv, {H, 1, D, scale, 0}, attn.as<float>());
  be.HeadMatMul(attn.as<float>(), n, uv.as<float>(), {H, R, dv, D, dv}, out.as<float>());
  std::vector<float> o(size_t(n * H * dv));
  be.Download(o.data(), out.data(), o.size() * sizeof(float));
  return o;
}

class MlaAbsorbedAttention : public ::testing::TestWithParam<std::array<int64_t, 7>> {};

TEST_P(MlaAbsorbedAttention, MatchesTheDecompressedReference) {
  const auto [H, dn, dr, dv, R, n, pos0] = GetParam();
  const MlaSpec m{0, R, dn, dr, dv};
  const float scale = 1.0f / std::sqrt(float(dn + dr));
  const int64_t T = pos0 + n;
  const auto q = RandomNormal(n * H * (dn + dr), 1), lat = RandomNormal(T * (R + dr), 2);
  const auto w = RandomNormal(H * (dn + dv) * R, 3, 0.3f);  // kv_b [H·(nope + v), kv_lora]
  const DenseLinear kv_b(TensorView{w.data(), DType::F32, {H * (dn + dv), R}});
  const MlaAbsorbed a = AbsorbKvB(kv_b, m, H);
  std::vector<float> want(size_t(n * H * dv));
  kernels::ref::MlaAttention(q.data(), n, pos0, lat.data(), w.data(), {H, dn, dr, dv, R, scale},
                             want.data());
  double peak = 0;
  for (float x : want) peak = std::max(peak, double(std::fabs(x)));
  std::vector<std::string> devices = {"ref", "cpu"};
  if (kernels::EmulatedCudaDevice()) devices.push_back("emu");
  if (kernels::BuiltWithCudaBackend() && kernels::CudaDeviceCount() > 0) devices.push_back("cuda");
  for (const std::string& dev : devices) {
    const std::vector<float> got =
        Absorbed(kernels::GetBackend(dev), a, m, H, q, n, pos0, lat, scale);
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i)
      err = std::max(err, double(std::fabs(got[i] - want[i])));
    EXPECT_LT(err / peak, 1e-5) << dev;
  }
}

// {heads, nope, rope, v, kv_lora, tokens, pos0}: degenerate, odd sizes with a prefill of 12
// rows, and DeepSeek-V2-Lite's heads at decode.
INSTANTIATE_TEST_SUITE_P(Shapes, MlaAbsorbedAttention,
                         ::testing::Values(std::array<int64_t, 7>{1, 1, 2, 1, 1, 1, 0},
                                           std::array<int64_t, 7>{4, 32, 16, 32, 32, 1, 31},
                                           std::array<int64_t, 7>{3, 7, 4, 5, 9, 12, 3},
                                           std::array<int64_t, 7>{16, 128, 64, 128, 512, 1, 40}));

}  // namespace
}  // namespace tq
