// convert never leaves a half-written model: refused inputs, a cancel flag, SIGKILL and SIGINT
// mid-way, a full disk (RLIMIT_FSIZE), and --force replacing an existing model in one step.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "convert/convert.h"
#include "convert_helpers.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/model.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::string Llama() { return test::ModelDir("tq-llama-21m"); }

// Everything in `dir` (names), for "nothing was left behind" checks.
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// `turboquant convert ...` as a child process; returns its pid. `fsize_limit` > 0 caps the
// size of any file it writes (RLIMIT_FSIZE: writes beyond fail as on a full disk).
pid_t StartConvert(const std::vector<std::string>& args, rlim_t fsize_limit = 0,
                   const std::string& err_file = "/dev/null") {
  const std::string bin = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant");
  const pid_t pid = fork();
  if (pid == 0) {
    if (fsize_limit > 0) {
      rlimit r{fsize_limit, fsize_limit};
      setrlimit(RLIMIT_FSIZE, &r);
    }
    freopen(err_file.c_str(), "w", stderr);
    freopen("/dev/null", "w", stdout);
    std::vector<char*> argv{const_cast<char*>(bin.c_str()), const_cast<char*>("convert")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until the child's temp dir holds a file (it is writing tensors); false on timeout.
bool WaitForTempFiles(const fs::path& parent, const std::string& out_name) {
  for (int i = 0; i < 600; ++i) {
    for (const auto& e : fs::directory_iterator(parent)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("." + out_name + ".tmp-convert-", 0) == 0 && !fs::is_empty(e.path())) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ConvertSafety, RefusesATurboQuantCheckpoint) {
  TempDir tmp;
  Convert(test::Options(Llama(), tmp.file("q4"), 4));
  try {
    Convert(test::Options(tmp.file("q4"), tmp.file("again"), 3));
    FAIL() << "converted a converted checkpoint";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("already a TurboQuant checkpoint"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.file("again")));
}

TEST(ConvertSafety, RefusesAnotherToolsQuantization) {
  TempDir tmp;
  const std::string dir = tmp.file("gptq");
  fs::create_directory(dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(Llama() + "/" + f, dir + "/" + f);
  fs::create_symlink(Llama() + "/model.safetensors", dir + "/model.safetensors");
  auto cfg = nlohmann::json::parse(ReadFileToString(Llama() + "/config.json"));
  cfg["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  test::WriteFile(dir + "/config.json", cfg.dump());
  try {
    Convert(test::Options(dir, tmp.file("out"), 4));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("already quantized (gptq"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.file("out")));
}

TEST(ConvertSafety, CancelFlagStopsWithNothingWritten) {
  TempDir tmp;
  std::atomic<bool> cancel{true};
  ConvertOptions o = test::Options(Llama(), tmp.file("out"), 4);
  o.cancel = &cancel;
  try {
    Convert(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(Entries(tmp.path()).empty());
}

TEST(ConvertSafety, KilledMidWayLeavesNoModelAndTheNextRunCleansUp) {
  TempDir tmp;
  const pid_t pid = StartConvert({"-m", Llama(), "-o", tmp.file("out"), "--bits", "4", "--scale",
                                  "mse", "--streaming", "-t", "1"});
  ASSERT_TRUE(WaitForTempFiles(tmp.path(), "out")) << "convert never started writing";
  kill(pid, SIGKILL);
  EXPECT_EQ(Wait(pid), 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(tmp.file("out")));
  // Only the dead process's hidden temp dir is there, and the next convert removes it.
  const auto left = Entries(tmp.path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".out.tmp-convert-", 0), 0u) << left[0];
  Convert(test::Options(Llama(), tmp.file("out"), 4));
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{"out"});
  EXPECT_NO_THROW(Model::Load(tmp.file("out")));
}

TEST(ConvertSafety, InterruptedBySigintLeavesNothing) {
  TempDir tmp;
  const std::string err = tmp.file("err.txt");
  fs::create_directory(tmp.file("work"));
  const pid_t pid = StartConvert({"-m", Llama(), "-o", tmp.file("work/out"), "--bits", "4",
                                  "--scale", "mse", "--streaming", "-t", "1"},
                                 0, err);
  ASSERT_TRUE(WaitForTempFiles(tmp.file("work"), "out"));
  kill(pid, SIGINT);
  EXPECT_EQ(Wait(pid), 1);
  EXPECT_TRUE(Entries(tmp.file("work")).empty());
  EXPECT_NE(ReadFileToString(err).find("interrupted by a signal; nothing written"),
            std::string::npos)
      << ReadFileToString(err);
}

TEST(ConvertSafety, DiskFullLeavesNoPartialOutput) {
  TempDir tmp;
  const std::string err = tmp.file("err.txt");
  fs::create_directory(tmp.file("work"));
  // Files of at most 4 MiB: the 21M model's 4-bit shard (~14 MiB) cannot be written.
  const pid_t pid = StartConvert(
      {"-m", Llama(), "-o", tmp.file("work/out"), "--bits", "4", "--scale", "rms"}, 4 << 20, err);
  EXPECT_EQ(Wait(pid), 1) << ReadFileToString(err);
  EXPECT_TRUE(Entries(tmp.file("work")).empty());
  EXPECT_NE(ReadFileToString(err).find("write failed"), std::string::npos) << ReadFileToString(err);
}

TEST(ConvertSafety, ForceReplacesTheOldModelInOneStep) {
  TempDir tmp;
  Convert(test::Options(Llama(), tmp.file("out"), 4));
  const auto before = nlohmann::json::parse(ReadFileToString(tmp.file("out/config.json")));
  EXPECT_EQ(before["quantization"]["bits"], 4);
  ConvertOptions o = test::Options(Llama(), tmp.file("out"), 3);
  o.force = true;
  Convert(o);
  const auto after = nlohmann::json::parse(ReadFileToString(tmp.file("out/config.json")));
  EXPECT_EQ(after["quantization"]["bits"], 3);
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{"out"});  // the old one is gone
  EXPECT_NO_THROW(Model::Load(tmp.file("out")));
}

}  // namespace
}  // namespace tq
