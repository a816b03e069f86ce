// plan's parts and verdicts (runtime/plan/memory_plan.h), the report, and the `plan` verb's exit
// codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "kv/kv_cache_bytes.h"
#include "runtime/plan/device_memory.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/plan/plan_report.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kMiB = 1 << 20;

PlanOptions Opts(const std::string& model, int64_t context, double ram_gb) {
  PlanOptions o;
  o.model_dir = test::ModelDir(model);
  o.context = context;
  o.ram_gb = ram_gb;
  o.threads = 2;
  return o;
}

TEST(PlanVerdict, PartsOfLlama) {
  const PlanOptions o = Opts("tq-llama-21m", 4096, 64);
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.checkpoint_kind, "hf");
  EXPECT_EQ(p.verdict, PlanVerdict::kFits);
  // Tied embeddings: every stored tensor is read, and nothing is a row-resident lookup table.
  EXPECT_EQ(p.file_bytes, p.weights_bytes);
  EXPECT_EQ(p.memory.weights, int64_t(Checkpoint::Open(o.model_dir)->TotalBytes()));
  EXPECT_EQ(p.lookup_table_bytes, 0);
  // fp16 KV: 2 (k, v) x 6 layers x 2 kv heads x 64 x 2 bytes per token.
  EXPECT_EQ(p.kv_bytes_per_token, 2 * 6 * 2 * 64 * 2);
  EXPECT_EQ(p.memory.kv, 4096 * p.kv_bytes_per_token);
  EXPECT_EQ(p.kv_sliding_layers, 0);
  // Workspace grows with the prefill step, KV with the context, and nothing else changes.
  const MemoryBreakdown small = PlanMemoryAt(p, o, 1024, 64);
  EXPECT_LT(small.workspace, p.memory.workspace);
  EXPECT_EQ(small.kv * 4, p.memory.kv);
  EXPECT_EQ(small.weights, p.memory.weights);
  // Beyond the model's chunk (512 rows) the workspace stays the same.
  EXPECT_EQ(PlanMemoryAt(p, o, 4096, 4096).workspace, PlanMemoryAt(p, o, 4096, 512).workspace);
  EXPECT_EQ(p.usable_bytes, int64_t(64) << 30);
  EXPECT_EQ(p.headroom_bytes, p.usable_bytes - p.memory.peak());
}

TEST(PlanVerdict, KvBytesFollowTheCacheDType) {
  PlanOptions o = Opts("tq-llama-21m", 1000, 64);
  o.kv.dtype = KvDType::kF32;
  EXPECT_EQ(MakeMemoryPlan(o).kv_bytes_per_token, 2 * 6 * 2 * 64 * 4);
  KvLayout l;
  l.num_layers = 3;
  l.num_heads = 4;
  l.num_kv_heads = 2;
  l.head_dim = 32;
  EXPECT_EQ(KvCacheBytes(l, {}, 10), 10 * 2 * 3 * 2 * 32 * 2);
  EXPECT_EQ(KvCacheBytes(l, {}, 0), 0);
  EXPECT_THROW(KvCacheBytes(l, {}, -1), Error);
}

TEST(PlanVerdict, FitsOnlySmallerSaysWhatFits) {
  PlanOptions o = Opts("tq-llama-21m", 16384, 1);
  const MemoryPlan big = MakeMemoryPlan(o);
  // Give it 8 MiB less than it needs: a smaller context or prefill step fits.
  o.ram_gb = double(big.memory.peak() - 8 * kMiB) / double(int64_t(1) << 30);
  const MemoryPlan p = MakeMemoryPlan(o);
  ASSERT_EQ(p.verdict, PlanVerdict::kFitsSmaller);
  ASSERT_GT(p.max_context, 0);
  EXPECT_LE(PlanMemoryAt(p, o, p.max_context, o.prefill_step).peak(), p.usable_bytes);
  EXPECT_GT(PlanMemoryAt(p, o, p.max_context + 1, o.prefill_step).peak(), p.usable_bytes);
  ASSERT_GT(p.max_prefill_step, 0);
  EXPECT_LE(PlanMemoryAt(p, o, o.context, p.max_prefill_step).peak(), p.usable_bytes);
  EXPECT_GT(PlanMemoryAt(p, o, o.context, p.max_prefill_step + 1).peak(), p.usable_bytes);
  const std::string line = VerdictLine(p);
  EXPECT_NE(line.find("--context " + std::to_string(p.max_context)), std::string::npos) << line;
  EXPECT_NE(line.find("--prefill-step " + std::to_string(p.max_prefill_step)), std::string::npos);
  // Far too little: nothing fits.
  o.ram_gb = 0.01;
  const MemoryPlan none = MakeMemoryPlan(o);
  EXPECT_EQ(none.verdict, PlanVerdict::kDoesNotFit);
  EXPECT_NE(VerdictLine(none).find("does not fit"), std::string::npos);
}

TEST(PlanVerdict, MoeExpertStreaming) {
  PlanOptions o = Opts("tq-qwen3moe-17m", 4096, 1);
  const MemoryPlan full = MakeMemoryPlan(o);
  EXPECT_TRUE(full.moe);
  EXPECT_GT(full.expert_bytes, full.weights_bytes / 2);  // 32 experts x 6 layers dominate
  EXPECT_LT(full.streaming_cache_bytes, full.expert_bytes);
  // Between the streaming peak and the full peak: only streaming fits.
  o.ram_gb = double(full.streaming_peak_bytes + kMiB) / double(int64_t(1) << 30);
  o.context = 4096;
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_NE(p.verdict, PlanVerdict::kFits);
  EXPECT_TRUE(p.streaming_fits);
  EXPECT_NE(VerdictLine(p).find("expert streaming"), std::string::npos);
  const auto j = PlanToJson(p);
  EXPECT_TRUE(j["expert_streaming"]["fits"].get<bool>());
}

TEST(PlanVerdict, ProjectedConversionAndJson) {
  PlanOptions o = Opts("tq-llama-21m", 2048, 64);
  const MemoryPlan stored = MakeMemoryPlan(o);
  o.recipe = QuantRecipeOptions{};
  o.recipe->bits = 3;
  const MemoryPlan q3 = MakeMemoryPlan(o);
  EXPECT_LT(q3.weights_bytes, stored.weights_bytes / 2);
  EXPECT_NE(q3.weights_source.find("3-bit"), std::string::npos);
  EXPECT_EQ(q3.memory.kv, stored.memory.kv);
  const auto j = PlanToJson(q3);
  for (const char* key :
       {"weights_bytes", "kv_bytes", "kv_bytes_per_token", "workspace_bytes", "reserve_bytes",
        "peak_bytes", "usable_bytes", "headroom_bytes", "verdict", "max_context"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["verdict"], "fits");
  EXPECT_EQ(j["peak_bytes"].get<int64_t>(), q3.memory.peak());
  EXPECT_NE(PlanToText(q3).find("verdict"), std::string::npos);
}

TEST(PlanVerdict, TurboQuantCheckpointAndErrors) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = tmp.file("tq");
  fs::create_directory(dir);
  auto cfg = nlohmann::json::parse(ReadFileToString(src + "/config.json"));
  cfg["quantization"] = {{"mode", "turboquant"}, {"format_version", 1}};
  test::WriteFile(dir + "/config.json", cfg.dump());
  fs::create_symlink(src + "/model.safetensors", dir + "/model.safetensors");
  PlanOptions o = Opts("tq-llama-21m", 1024, 64);
  o.model_dir = dir;
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.checkpoint_kind, "turboquant");
  o.recipe = QuantRecipeOptions{};
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);

  o = Opts("tq-llama-21m", 0, 64);
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);
  o = Opts("tq-llama-21m", 64, 64);
  o.prefill_step = 0;
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);
  o = Opts("tq-llama-21m", 64, 64);
  o.model_dir = tmp.file("missing");
  try {
    MakeMemoryPlan(o);
    ADD_FAILURE() << "planned a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  // Weights missing: names the directory.
  fs::remove(dir + "/model.safetensors");
  o.model_dir = dir;
  EXPECT_THROW(MakeMemoryPlan(o), Error);
}

TEST(PlanVerdict, SlidingWindowLayers) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = tmp.file("mistral");
  fs::create_directory(dir);
  auto cfg = nlohmann::json::parse(ReadFileToString(src + "/config.json"));
  cfg["model_type"] = "mistral";
  cfg["architectures"] = {"MistralForCausalLM"};
  cfg["sliding_window"] = 256;
  test::WriteFile(dir + "/config.json", cfg.dump());
  fs::create_symlink(src + "/model.safetensors", dir + "/model.safetensors");
  PlanOptions o = Opts("tq-llama-21m", 4096, 64);
  o.model_dir = dir;
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.kv_sliding_layers, 6);
  EXPECT_EQ(p.sliding_window, 256);
  // The KV size is what the cache stores (KvCacheBytes on the same layout), and the plan says
  // whether sliding layers keep more than their window.
  EXPECT_EQ(p.memory.kv, KvCacheBytes(KvLayoutForConfig(p.config), o.kv, 4096));
  bool noted = false;
  for (const auto& n : p.notes) noted = noted || n.find("sliding-window") != std::string::npos;
  // Every layer slides here: a cache that kept only the window would hold 256 positions.
  const int64_t window_only = KvCacheBytes(KvLayoutForConfig(p.config), o.kv, 256);
  EXPECT_EQ(noted, p.memory.kv > window_only);
  EXPECT_NE(PlanToText(p).find("6 sliding, window 256"), std::string::npos);
}

TEST(PlanVerdict, CudaCountsDeviceMemoryOnly) {
  PlanOptions o = Opts("tq-llama-21m", 1024, 80);
  o.device = PlanDevice::kCuda;  // with --ram-gb: no device query
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.device, "cuda");
  EXPECT_EQ(p.reserve_tokenizer, 0);
  EXPECT_EQ(p.reserve_device, 512 * kMiB);
  EXPECT_EQ(p.memory.reserve, 512 * kMiB);
}

TEST(PlanVerdict, CudaWithoutCudaBuild) {
  PlanOptions o = Opts("tq-llama-21m", 64, 64);
  o.ram_gb.reset();
  o.device = PlanDevice::kCuda;
  if (BuiltWithCuda()) GTEST_SKIP() << "a CUDA build: covered on the GPU machine";
  try {
    MakeMemoryPlan(o);
    ADD_FAILURE() << "no error without CUDA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without CUDA"), std::string::npos) << e.what();
  }
}

int RunPlanVerb(const std::string& args) {
  const std::string cmd = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant") + " plan " +
                          args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PlanVerdict, VerbExitCodes) {
  const std::string m = "--model " + test::ModelDir("tq-llama-21m");
  EXPECT_EQ(RunPlanVerb(m + " --context 2048 --ram-gb 64"), 0);
  EXPECT_EQ(RunPlanVerb(m + " --context 2048 --ram-gb 0.01"), 1);
  EXPECT_EQ(RunPlanVerb("--model /nonexistent/dir"), 1);
  EXPECT_EQ(RunPlanVerb(m + " --group-size 32"), 2);  // needs --bits
  EXPECT_EQ(RunPlanVerb(m + " --bits 5"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --bits 4 --protect-layers 3-1"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --kv-bits 3 --kv-k-bits 3 --kv-v-bits 3"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --context 0"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --bits 4 --ram-gb 64 --json"), 0);
}

}  // namespace
}  // namespace tq
