// Decode cost of the new mixers' state ops at hub shapes, against the bytes they must touch:
// a decode step of Gated DeltaNet (Qwen3-Next-80B: 16 key / 32 value heads of 128, state
// [32, 128, 128] fp32 read + written) and Mamba-2 SSD (Nemotron-H-8B: 128 heads of 64, state 128,
// 8 groups), and MLA decode attention on the latent cache (DeepSeek-V2-Lite: 16 heads, nope 128,
// rope 64, v 128, kv_lora 512) at 4096 cached positions. bytes_per_second counts the state (or
// latent cache) bytes each step must read and write; BM_Copy moves the same bytes with memcpy in
// the same run, so the ratio says how close to the memory bound each op runs. One kernel thread
// (TQ_BENCH_THREADS overrides): on a shared, loaded machine thread wake-ups would dominate.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/recurrent_ops.h"

namespace {

std::vector<float> Random(size_t n, uint64_t seed, float scale = 0.1f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

constexpr int64_t kHk = 16, kHv = 32, kDk = 128, kDv = 128;  // Qwen3-Next-80B-A3B
constexpr int64_t kMH = 128, kMP = 64, kMN = 128, kMG = 8;   // Nemotron-H-8B
constexpr int64_t kLH = 16, kLn = 128, kLr = 64, kLv = 128, kLR = 512, kLT = 4096;  // V2-Lite

void BM_DeltaNetDecode(benchmark::State& state) {
  tq::kernels::DeltaNetParams p;
  p.num_k_heads = kHk;
  p.num_v_heads = kHv;
  p.k_dim = kDk;
  p.v_dim = kDv;
  p.q_stride = p.k_stride = kHk * kDk;
  p.v_stride = kHv * kDv;
  p.scale = 1.0f / std::sqrt(float(kDk));
  auto q = Random(kHk * kDk, 1), k = Random(kHk * kDk, 2), v = Random(kHv * kDv, 3);
  std::vector<float> g(kHv, -0.01f), beta(kHv, 0.5f), out(kHv * kDv);
  auto s = Random(kHv * kDk * kDv, 4);
  for (auto _ : state) {
    tq::kernels::cpu::GatedDeltaNet(q.data(), k.data(), v.data(), g.data(), beta.data(), 1,
                                    s.data(), p, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t(s.size() * sizeof(float)) * 2);
}
BENCHMARK(BM_DeltaNetDecode)->UseRealTime();

void BM_SsdDecode(benchmark::State& state) {
  tq::kernels::SsdParams p;
  p.num_heads = kMH;
  p.head_dim = kMP;
  p.state_size = kMN;
  p.n_groups = kMG;
  p.x_stride = kMH * kMP;
  p.bc_stride = kMG * kMN;
  auto x = Random(kMH * kMP, 1), B = Random(kMG * kMN, 2), C = Random(kMG * kMN, 3);
  std::vector<float> dt(kMH, 0.05f), A(kMH, -1.0f), D(kMH, 1.0f), y(kMH * kMP);
  auto s = Random(kMH * kMP * kMN, 4);
  for (auto _ : state) {
    tq::kernels::cpu::Ssd(x.data(), B.data(), C.data(), dt.data(), A.data(), D.data(), 1, s.data(),
                          p, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t(s.size() * sizeof(float)) * 2);
}
BENCHMARK(BM_SsdDecode)->UseRealTime();

// As the forward pass runs it (model/mla_absorb.h): q_lat = W_UK[h]ᵀ q_nope (HeadMatMul), the
// plain attention of the 16 heads over one latent KV head [c | k_pe] (values [c | 0]), then
// W_UV[h] (HeadMatMul), on the cpu backend.
void BM_MlaDecode(benchmark::State& state) {
  tq::kernels::Backend& be = tq::kernels::CpuBackend();
  const int64_t D = kLR + kLr;
  auto q = Random(kLH * (kLn + kLr), 1), qf = Random(kLH * D, 2);
  auto k = Random(kLT * D, 3), v = Random(kLT * D, 4);
  auto uk = Random(kLH * kLR * kLn, 5), uv = Random(kLH * kLv * kLR, 6);
  std::vector<float> attn(kLH * D), out(kLH * kLv);
  const tq::kernels::KvView kv{k.data(), v.data(), tq::DType::F32, kLT * D};
  const tq::kernels::AttentionParams ap{kLH, 1, D, 1.0f / std::sqrt(float(kLn + kLr)), 0};
  for (auto _ : state) {
    be.HeadMatMul(q.data(), 1, uk.data(), {kLH, kLn, kLR, kLn + kLr, D}, qf.data());
    be.Attention(qf.data(), 1, kLT - 1, kv, ap, attn.data());
    be.HeadMatMul(attn.data(), 1, uv.data(), {kLH, kLR, kLv, D, kLv}, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  // Bytes a decode step must read: the latent cache's keys and values and the absorbed weights.
  state.SetBytesProcessed(state.iterations() *
                          int64_t((k.size() + v.size() + uk.size() + uv.size()) * sizeof(float)));
}
BENCHMARK(BM_MlaDecode)->UseRealTime();

// memcpy of the DeltaNet state's bytes (read + write counted), for the ratio.
void BM_CopyDeltaNetState(benchmark::State& state) {
  auto a = Random(kHv * kDk * kDv, 1);
  std::vector<float> b(a.size());
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t(a.size() * sizeof(float)) * 2);
}
BENCHMARK(BM_CopyDeltaNetState)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("TQ_BENCH_THREADS");
  tq::ThreadPool::SetGlobalThreads(env ? std::atoi(env) : 1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
