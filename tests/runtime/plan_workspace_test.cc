// plan's workspace figure (ForwardWorkspaceBytes, runtime/plan/memory_plan.h) against what the
// forward pass really allocates: the cpu backend's AllocatedBytes() across one Forward of n
// tokens, less what the cache itself took during it (recurrent-state snapshots). For every family
// of the shared and arch models at a decode-sized and a prefill-sized chunk, the projection must
// cover the pass's buffers, and overstate them by no more than 25% + 1 MiB: the room for the parts
// of the projection that are not the pass's buffers (the GEMM's packed input, per-thread attention
// scratch, the logits row).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/plan/memory_plan.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

constexpr int kThreads = 2;

struct Case {
  std::string dir;
  int64_t n;
};

class PlanWorkspace : public ::testing::TestWithParam<Case> {};

TEST_P(PlanWorkspace, CoversWhatTheForwardPassAllocates) {
  const auto& [name, n] = GetParam();
  const std::string dir = test::ModelDir(name);
  kernels::Backend& be = kernels::GetBackend("cpu");
  ASSERT_GE(be.AllocatedBytes(), 0) << "the cpu backend counts its buffers";
  auto model = Model::Load(dir, {.device = "cpu"});
  auto cache = model->NewCache({.max_tokens = 256, .dtype = KvDType::kF32});
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(1 + (i * 37) % 4000);
  const int64_t before = be.AllocatedBytes(), state_before = cache->RecurrentBytes();
  std::vector<float> logits(size_t(model->vocab_size()));
  model->Forward(ids, *cache, logits.data());
  const int64_t pass = be.AllocatedBytes() - before - (cache->RecurrentBytes() - state_before);
  const int64_t planned = ForwardWorkspaceBytes(LoadModelConfig(dir), n, kThreads);
  std::printf("%s n=%lld: pass %.3f MiB, plan %.3f MiB (%.2fx)\n", name.c_str(), (long long)n,
              pass / 1048576.0, planned / 1048576.0, double(planned) / double(pass));
  EXPECT_GE(planned, pass) << name << " n=" << n;
  EXPECT_LE(planned, pass + pass / 4 + (int64_t(1) << 20)) << name << " n=" << n;
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const char* m :
       {"tq-llama-21m", "tq-qwen3moe-17m", "arch/tq-arch-gemma2", "arch/tq-arch-gemma3-text",
        "arch/tq-arch-gemma4-text", "arch/tq-arch-phi3", "arch/tq-arch-qwen2-moe",
        "arch/tq-arch-gpt-oss", "arch/tq-arch-deepseek-v2", "arch/tq-arch-deepseek-v3",
        "arch/tq-arch-qwen3-next", "arch/tq-arch-qwen3-5-text", "arch/tq-arch-qwen3-5-moe-text",
        "arch/tq-arch-nemotron-h"})
    for (int64_t n : {1, 8, 100}) out.push_back({m, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, PlanWorkspace, ::testing::ValuesIn(Cases()), [](const auto& info) {
  std::string s = info.param.dir + "_n" + std::to_string(info.param.n);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
});

}  // namespace
}  // namespace tq
