// The TurboQuant cache on a device backend: storage in device memory and every append as backend
// ops (KvEncode, Rotate, CenterRows, GatherColumns, KvStorePair, Copy). Run on "emu" (the CUDA
// backend's kernels on the host emulator; the GPU machine runs the same cases through the model
// tests) against the same cache on the ref backend: the decoded layers and the attention outputs
// agree (NMSE <= 1e-6: the device rotates and sums in another order, so a near-tie may code one
// vector differently), for every span layout and option: sink, window (the tail coded in blocks
// of 32), centering, QJL, the outlier split, boundary layers, truncation and re-append.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_emu/cuda_emu.h"
#include "kernels/backend.h"
#include "kv/turboquant_kv_cache.h"
#include "kv_test_util.h"

namespace tq {
namespace {

using kvtest::Layout;
using kvtest::Nmse;
using kvtest::Random;

constexpr double kBound = 1e-6;

struct DeviceConfig {
  std::string name;
  KvCacheOptions o;
};

std::vector<DeviceConfig> Configs() {
  std::vector<DeviceConfig> c;
  auto add = [&](std::string name, auto edit) {
    KvCacheOptions o;
    o.max_tokens = 160;
    o.k_bits = 4;
    o.v_bits = 3;
    edit(o);
    c.push_back({std::move(name), o});
  };
  add("defaults_K4V3", [](KvCacheOptions&) {});
  add("sink4_window40", [](KvCacheOptions& o) { o.sink = 4, o.window = 40; });
  add("qjl_K3V3_norm_nocenter", [](KvCacheOptions& o) {
    o.k_bits = 3, o.v_bits = 3, o.qjl = true, o.center = 0, o.scale = KvScale::kNorm;
  });
  add("outliers32_K3V2.5_unbiased", [](KvCacheOptions& o) {
    o.k_bits = 3, o.v_bits = 2.5, o.outliers = 32, o.scale = KvScale::kUnbiased;
  });
  add("boundary1_K8V4_window8", [](KvCacheOptions& o) {
    o.k_bits = 8, o.v_bits = 4, o.boundary = 1, o.window = 8, o.center = 16;
  });
  return c;
}

class TurboQuantDevice : public ::testing::TestWithParam<DeviceConfig> {};

INSTANTIATE_TEST_SUITE_P(Options, TurboQuantDevice, ::testing::ValuesIn(Configs()),
                         [](const auto& info) {
                           std::string s = info.param.name;
                           for (char& ch : s)
                             if (ch == '.') ch = '_';
                           return s;
                         });

TEST_P(TurboQuantDevice, AgreesWithTheHostCache) {
  kernels::Backend* dev = kernels::EmulatedCudaDevice();
  if (!dev) GTEST_SKIP() << "the CUDA emulator does not run under ASan";
  ASSERT_NE(dev->memory_space(), MemorySpace::kHost);
  const KvLayout layout = Layout(3, 64);
  const KvCacheOptions& o = GetParam().o;
  TurboQuantKvCache host(layout, o, kernels::RefBackend());
  TurboQuantKvCache gpu(layout, o, *dev);
  std::mt19937 rng(11);
  const int64_t kvw = layout.num_kv_heads * layout.head_dim;
  const int64_t qw = layout.num_heads * layout.head_dim;
  // Chunks: a prompt, decode steps past the window's first block, a re-append (truncation).
  const std::vector<int64_t> chunks = {50, 1, 1, 30, 1, 9, 1};
  int64_t step = 0;
  for (int64_t n : chunks) {
    if (step == 5) {  // drop the last chunk and go on from there
      host.Truncate(host.size() - 1);
      gpu.Truncate(gpu.size() - 1);
    }
    ++step;
    for (int64_t l = 0; l < layout.num_layers; ++l) {
      const auto k = Random(size_t(n * kvw), rng, 1.5f), v = Random(size_t(n * kvw), rng);
      const auto q = Random(size_t(n * qw), rng, 2.0f);
      std::vector<float> want(q.size());
      host.Append(l, k.data(), v.data(), n);
      host.Attend(l, q.data(), n, want.data());
      auto dk = dev->Upload(k.data(), k.size() * 4, "k"),
           dv = dev->Upload(v.data(), v.size() * 4, "v");
      auto dq = dev->Upload(q.data(), q.size() * 4, "q");
      auto dout = dev->Allocate(q.size() * 4, "out");
      gpu.Append(l, dk.as<float>(), dv.as<float>(), n);
      gpu.Attend(l, dq.as<float>(), n, dout.as<float>());
      std::vector<float> got(q.size());
      dev->Download(got.data(), dout.data(), got.size() * 4);
      ASSERT_LE(Nmse(got, want), kBound) << "layer " << l << " after " << host.size() << " + " << n;
    }
    host.Commit(n);
    gpu.Commit(n);
  }
  ASSERT_EQ(host.size(), gpu.size());
  for (int64_t l = 0; l < layout.num_layers; ++l) {
    if (!host.IsCompressed(l)) continue;
    const size_t count = size_t(host.size() * kvw);
    std::vector<float> hk(count), hv(count), gk(count), gv(count);
    host.DecodeLayer(l, host.size(), hk.data(), hv.data());
    gpu.DecodeLayer(l, gpu.size(), gk.data(), gv.data());
    EXPECT_LE(Nmse(gk, hk), kBound) << "keys of layer " << l;
    EXPECT_LE(Nmse(gv, hv), kBound) << "values of layer " << l;
  }
  EXPECT_EQ(gpu.BytesPerToken(), host.BytesPerToken());
}

TEST(TurboQuantDeviceErrors, RoundtripStatisticsNeedTheHost) {
  kernels::Backend* dev = kernels::EmulatedCudaDevice();
  if (!dev) GTEST_SKIP() << "the CUDA emulator does not run under ASan";
  KvCacheOptions o;
  o.max_tokens = 64;
  o.k_bits = o.v_bits = 4;
  o.roundtrip_stats = true;
  try {
    TurboQuantKvCache c(Layout(2, 64), o, *dev);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-stats"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tq
