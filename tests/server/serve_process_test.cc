// `turboquant serve` as a process with the shared --kv-* flags: a TurboQuant-compressed cache
// serves a completion, and /metrics describes the compressed cache.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testutil/testutil.h"

namespace tq::server {
namespace {

// The server process: started with `args`, stopped (SIGTERM) by the destructor.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args) {
    const std::string bin = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant");
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv{const_cast<char*>(bin.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    out_ = fdopen(out[0], "r");
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (out_) fclose(out_);
  }
  // Reads stdout up to the "listening on http://HOST:PORT" line; the line, or "" on exit.
  std::string WaitListening() {
    char buf[4096];
    while (out_ && fgets(buf, sizeof buf, out_)) {
      const std::string line = buf;
      if (line.find("listening on http://") != std::string::npos) return line;
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

TEST(ServeProcess, CompressedKvCacheServesACompletion) {
  ServeProcess p({"serve", "--model", test::ModelDir("tq-llama-21m"), "--port", "0", "--ctx", "256",
                  "--parallel", "2", "--threads", "2", "--kv-bits", "4", "--kv-window", "16"});
  const std::string line = p.WaitListening();
  ASSERT_FALSE(line.empty()) << "serve did not start";
  EXPECT_NE(line.find("kv K4V4 (sink 0, window 16"), std::string::npos) << line;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(:(\d+)\s*$)"))) << line;
  httplib::Client c("127.0.0.1", std::stoi(m[1]));
  c.set_read_timeout(120);
  auto r = c.Post("/v1/completions",
                  R"({"prompt":"Once upon a time","max_tokens":24,"temperature":0,)"
                  R"("ignore_eos":true})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24) << r->body;
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  const std::string& b = metrics->body;
  EXPECT_NE(b.find(R"x(turboquant_kv_cache_info{cache="K4V4 (sink 0, window 16)x"),
            std::string::npos)
      << b;
  // tq-llama-21m: 6 layers x 2 KV heads x 64 dims x (K + V): 3,072 bytes per token at fp16;
  // 4-bit codes + one fp16 norm per vector: 816.
  std::smatch bpt;
  ASSERT_TRUE(std::regex_search(b, bpt, std::regex(R"(turboquant_kv_cache_bytes_per_token (\d+))")))
      << b;
  EXPECT_EQ(std::stoll(bpt[1]), 816) << b;
  EXPECT_NE(b.find("turboquant_generated_tokens_total 24"), std::string::npos) << b;
  // The cache holds the prompt and the 23 tokens fed back, 816 bytes each (the gauges are set
  // after the step that finished the request: poll briefly).
  std::smatch prompt;
  ASSERT_TRUE(std::regex_search(b, prompt, std::regex(R"(turboquant_prompt_tokens_total (\d+))")))
      << b;
  const std::string want =
      "turboquant_kv_cache_bytes " + std::to_string(816 * (std::stoll(prompt[1]) + 23)) + "\n";
  for (int i = 0; i < 100 && metrics->body.find(want) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    metrics = c.Get("/metrics");
    ASSERT_TRUE(metrics);
  }
  EXPECT_NE(metrics->body.find(want), std::string::npos) << want << metrics->body;
}

TEST(ServeProcess, BadKvFlagsAreUsageErrors) {
  for (const std::string bad : {"--kv-bits 5", "--kv-window 8", "--kv-bits 4 --kv-k-bits 4"}) {
    std::vector<std::string> args{"serve", "--model", test::ModelDir("tq-llama-21m"), "--port",
                                  "0"};
    std::string word;
    for (std::istringstream in(bad); in >> word;) args.push_back(word);
    const std::string bin = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant");
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> argv{const_cast<char*>(bin.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      freopen("/dev/null", "w", stderr);
      freopen("/dev/null", "w", stdout);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << bad;
    EXPECT_EQ(WEXITSTATUS(status), 2) << bad;
  }
}

}  // namespace
}  // namespace tq::server
