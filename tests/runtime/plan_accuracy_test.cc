// plan's projected peak against the peak RSS that `turboquant bench` and `turboquant generate`
// actually reach (the binary runs as a child process; its ru_maxrss comes from wait4). Within 15%
// on the shared models and on synth checkpoints of Llama-3.2-1B/3B shape (2 layers, so the test
// stays small), at two contexts each.
#include <fcntl.h>
#include <fmt/format.h>
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

int64_t Planned(const std::string& dir, int64_t context, int64_t step, bool tokenizer) {
  PlanOptions o;
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
void CheckBench(const std::string& dir, int64_t prompt, int64_t context) {
  const int64_t gen = 2;
  const ChildRun r =
      RunChild({Binary(), "bench", "--model", dir, "--prompt-tokens", std::to_string(prompt),
                "--gen-tokens", std::to_string(gen), "--context", std::to_string(context),
                "--context-fill", "synthetic", "--threads", "2", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // bench loads no tokenizer: plan without one.
  const int64_t planned = Planned(dir, context + gen, prompt, /*tokenizer=*/false);
  Compare(fmt::format("bench {} ctx {} step {}", std::filesystem::path(dir).filename().string(),
                      context, prompt),
          planned, j["peak_rss_bytes"].get<int64_t>());
  EXPECT_NEAR(double(r.max_rss_bytes), double(j["peak_rss_bytes"].get<int64_t>()),
              0.02 * double(r.max_rss_bytes));
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

TEST(PlanAccuracy, SharedModelsGenerate) {
  for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    CheckGenerate(test::ModelDir(m), 400);
    CheckGenerate(test::ModelDir(m), 2500);
  }
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
