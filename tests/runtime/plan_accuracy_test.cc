// plan's projected peak against the peak RSS that `turboquant bench` and `turboquant generate`
// actually reach (the binary runs as a child process; its ru_maxrss comes from wait4). Within 15%
// on the shared models and on synth checkpoints of Llama-3.2-1B/3B shape (2 layers, so the test
// stays small), at two contexts each, and on a sliding-window model past its window.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io/model_config.h"
#include "kv/kv_cache_bytes.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/synth.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

constexpr double kTolerance = 0.15;

std::string Binary() { return test::RequireFile(test::BinaryDir() + "/src/cli/turboquant"); }

struct ChildRun {
  int status = -1;
  int64_t max_rss_bytes = 0;
  std::string out;
};

// Runs argv with stdout captured (stderr discarded); the child's peak RSS from wait4.
ChildRun RunChild(const std::vector<std::string>& args) {
  int pipefd[2];
  EXPECT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 2);
    ::close(pipefd[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  ChildRun r;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) r.out.append(buf, size_t(n));
  ::close(pipefd[0]);
  struct rusage ru {};
  ::wait4(pid, &r.status, 0, &ru);
  r.max_rss_bytes = int64_t(ru.ru_maxrss) * 1024;
  return r;
}

int64_t Planned(const std::string& dir, int64_t context, int64_t step, bool tokenizer,
                const KvCacheOptions& kv = {}) {
  PlanOptions o;
  o.kv = kv;
  o.model_dir = dir;
  o.context = context;
  o.prefill_step = step;
  o.threads = 2;
  o.ram_gb = 1024;
  o.with_tokenizer = tokenizer;
  return MakeMemoryPlan(o).memory.peak();
}

void Compare(const std::string& what, int64_t planned, int64_t measured) {
  const double ratio = double(planned) / double(measured);
  std::printf("[plan accuracy] %-60s planned %7.1f MiB measured %7.1f MiB ratio %.3f\n",
              what.c_str(), double(planned) / (1 << 20), double(measured) / (1 << 20), ratio);
  EXPECT_NEAR(ratio, 1.0, kTolerance) << what;
}

// MoE note: a short prompt may leave some experts unrouted (their weights never paged in); plan
// counts every expert, as a long prompt touches them all.

// bench: prefill `prompt` tokens, then a synthetic context of `context` tokens, decode 2.
// `kv_args` / `kv`: the same compressed-cache settings as flags and as options. Returns
// measured - planned.
int64_t CheckBench(const std::string& dir, int64_t prompt, int64_t context,
                   const std::vector<std::string>& kv_args = {}, const KvCacheOptions& kv = {}) {
  const int64_t gen = 2;
  std::vector<std::string> args = {Binary(),          "bench",
                                   "--model",         dir,
                                   "--prompt-tokens", std::to_string(prompt),
                                   "--gen-tokens",    std::to_string(gen),
                                   "--context",       std::to_string(context),
                                   "--context-fill",  "synthetic",
                                   "--threads",       "2",
                                   "--json"};
  args.insert(args.end(), kv_args.begin(), kv_args.end());
  const ChildRun r = RunChild(args);
  EXPECT_EQ(r.status, 0) << r.out;
  if (r.status != 0) return 0;
  const auto j = nlohmann::json::parse(r.out);
  const int64_t measured = j["peak_rss_bytes"].get<int64_t>();
  // bench loads no tokenizer: plan without one.
  const int64_t planned = Planned(dir, context + gen, prompt, /*tokenizer=*/false, kv);
  Compare(fmt::format("bench {} ctx {} step {} {}", std::filesystem::path(dir).filename().string(),
                      context, prompt, fmt::join(kv_args, " ")),
          planned, measured);
  EXPECT_NEAR(double(r.max_rss_bytes), double(measured), 0.02 * double(r.max_rss_bytes));
  return measured - planned;
}

// generate: a real prompt (the first `bytes` of an eval text), greedy, 4 tokens.
void CheckGenerate(const std::string& dir, size_t bytes) {
  const std::string text = ReadFileToString(test::EvalFile("eval_other.txt")).substr(0, bytes);
  const ChildRun tok = RunChild({Binary(), "tokenize", "--model", dir, "--text", text});
  ASSERT_EQ(tok.status, 0);
  const int64_t prompt = int64_t(nlohmann::json::parse(tok.out).size());
  const int64_t gen = 4;
  const ChildRun r = RunChild({Binary(), "generate", "--model", dir, "--prompt", text,
                               "--max-tokens", std::to_string(gen), "--temp", "0", "--threads", "2",
                               "--ctx", std::to_string(prompt + gen)});
  ASSERT_EQ(r.status, 0);
  // A prompt shorter than the prefill step runs as one chunk of its own length.
  const int64_t planned = Planned(dir, prompt + gen, std::min<int64_t>(512, prompt), true);
  Compare(
      fmt::format("generate {} prompt {}", std::filesystem::path(dir).filename().string(), prompt),
      planned, r.max_rss_bytes);
}

TEST(PlanAccuracy, SharedModelsBench) {
  for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    CheckBench(test::ModelDir(m), 512, 1024);
    CheckBench(test::ModelDir(m), 64, 4096);
  }
}

// The compressed cache's projection: the change of the peak against the fp16 cache (KV is a small
// part of these models' peak, so compare what the compression saves, within 5%).
TEST(PlanAccuracy, CompressedKvCache) {
  const std::string m = test::ModelDir("tq-llama-21m");
  const int64_t context = 8190;
  const int64_t base_error = CheckBench(m, 64, context);
  KvCacheOptions kv;
  kv.k_bits = kv.v_bits = 3;
  kv.sink = 64;
  kv.window = 256;
  const int64_t error =
      CheckBench(m, 64, context, {"--kv-bits", "3", "--kv-sink", "64", "--kv-window", "256"}, kv);
  const KvLayout layout = KvLayoutForConfig(LoadModelConfig(m));
  const int64_t saved =
      KvCacheBytes(layout, {}, context + 2) - KvCacheBytes(layout, kv, context + 2);
  EXPECT_GT(saved, 0);
  // measured - planned is the same with either cache, up to 5% of what compression saves.
  EXPECT_NEAR(double(error), double(base_error), 0.05 * double(saved));
}

TEST(PlanAccuracy, SharedModelsGenerate) {
  for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    CheckGenerate(test::ModelDir(m), 400);
    CheckGenerate(test::ModelDir(m), 2500);
  }
}

// Sliding-window layers keep only window + 512 positions: tq-llama-21m relabelled as mistral with
// a 256-token window, at contexts far past it (every position would be 48 MiB more at 16K).
TEST(PlanAccuracy, SlidingWindowModel) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = tmp.file("mistral-21m");
  std::filesystem::create_directory(dir);
  auto cfg = nlohmann::json::parse(ReadFileToString(src + "/config.json"));
  cfg["model_type"] = "mistral";
  cfg["architectures"] = {"MistralForCausalLM"};
  cfg["sliding_window"] = 256;
  cfg["max_position_embeddings"] = 32768;
  test::WriteFile(dir + "/config.json", cfg.dump());
  for (const char* f : {"model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    std::filesystem::create_symlink(src + "/" + f, dir + "/" + f);
  const int64_t error = CheckBench(dir, 64, 16384);
  // The KV part alone: far below what a cache of every position would take.
  const KvLayout layout = KvLayoutForConfig(LoadModelConfig(dir));
  EXPECT_LT(std::abs(error), KvCacheBytes(KvLayoutForConfig(LoadModelConfig(src)), {}, 16384) / 4);
  EXPECT_EQ(KvCacheBytes(layout, {}, 16386), KvCacheBytes(layout, {}, 4096));
  CheckBench(dir, 512, 4096);
  CheckGenerate(dir, 8000);  // ~2,300 tokens: past window + 512
}

TEST(PlanAccuracy, SynthLlama1B3B) {
  test::TempDir tmp;
  for (const char* like : {"llama-3.2-1b", "llama-3.2-3b"}) {
    SynthOptions o;
    o.like = like;
    o.out_dir = tmp.file(like);
    o.layers = 2;
    o.progress = false;
    WriteSynthCheckpoint(o);
    CheckBench(o.out_dir, 128, 1024);
    CheckBench(o.out_dir, 32, 8192);
    if (std::string(like) == "llama-3.2-1b") CheckGenerate(o.out_dir, 600);
    std::filesystem::remove_all(o.out_dir);
  }
}

}  // namespace
}  // namespace tq
