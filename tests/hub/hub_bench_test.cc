// Measurements for docs/BENCHMARKS.md, run only when asked (they are not checks):
//   TQ_HUB_BENCH_PLAN=DIR[,DIR...]  bytes `plan` reads over HTTP for each checkpoint directory
//                                   (served from disk by the fake hub on 127.0.0.1)
//   TQ_HUB_BENCH_DOWNLOAD=DIR       `turboquant download` of DIR's files on loopback against
//                                   `curl` fetching the same files from the same server
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/run_cli.h"
#include "hub/fake_hub.h"
#include "testutil/testutil.h"

namespace tq::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(HubBench, PlanBytesOverHttp) {
  const char* dirs = std::getenv("TQ_HUB_BENCH_PLAN");
  if (!dirs) GTEST_SKIP() << "set TQ_HUB_BENCH_PLAN=DIR[,DIR...] to measure";
  FakeHub hub;
  for (const std::string& dir : Split(dirs)) {
    const std::string id = "bench/" + fs::path(dir).filename().string();
    hub.AddRepoFromDirUnhashed(id, dir);
    hub.Reset();
    TempDir cache;
    std::string cmd = "env HF_ENDPOINT=" + hub.endpoint() +
                      " HF_HUB_CACHE=" + ShellQuote(cache.path().string()) + " " + CliPath() +
                      " plan --model " + id + " --json --ram-gb 64 --context 8192 2>/dev/null";
    auto run = [](const std::string& c) {
      std::string out;
      FILE* p = popen(c.c_str(), "r");
      char buf[4096];
      for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      if (p) pclose(p);
      return nlohmann::json::parse(out);
    };
    nlohmann::json j = run(cmd);
    nlohmann::json local =
        run(CliPath() + " plan --model " + ShellQuote(dir) + " --json --ram-gb 64 --context 8192");
    nlohmann::json remote = j;
    remote.erase("hub");
    remote.erase("model_dir");
    local.erase("model_dir");
    int64_t total = 0;
    for (const auto& f : hub.repo(id).files) total += f.size;
    std::printf(
        "HUB-BENCH plan %s: shards %d, bytes_read %lld, served %lld, requests %zu, "
        "download_bytes %lld, repository bytes %lld, verdict %s, same plan as local: %s\n",
        id.c_str(), j["hub"]["shards"].get<int>(), (long long)j["hub"]["bytes_read"].get<int64_t>(),
        (long long)hub.body_bytes.load(), hub.Requests().size(),
        (long long)j["hub"]["download_bytes"].get<int64_t>(), (long long)total,
        j["verdict"].get<std::string>().c_str());
  }
}

TEST(HubBench, DownloadThroughputAgainstCurl) {
  const char* dir = std::getenv("TQ_HUB_BENCH_DOWNLOAD");
  if (!dir) GTEST_SKIP() << "set TQ_HUB_BENCH_DOWNLOAD=DIR to measure";
  FakeHub hub;
  hub.AddRepoFromDir("bench/dl", dir);
  int64_t total = 0;
  for (const auto& f : hub.repo("bench/dl").files) total += f.size;
  for (int round = 0; round < 2; ++round) {
    TempDir cache, curl_out;
    const double tq = Seconds([&] {
      const std::string cmd = "env HF_ENDPOINT=" + hub.endpoint() +
                              " HF_HUB_CACHE=" + ShellQuote(cache.path().string()) + " " +
                              CliPath() + " download bench/dl -q --include '*' >/dev/null 2>&1";
      ASSERT_EQ(std::system(cmd.c_str()), 0);
    });
    // curl: the same files, the same URLs (following the CDN redirect), 4 at a time as `download`
    // does by default, written to disk.
    std::string cmd = "curl -sS -L --parallel --parallel-max 4";
    for (const auto& f : hub.repo("bench/dl").files)
      cmd += " -o " + ShellQuote(curl_out.file(f.path)) + " " + hub.endpoint() +
             "/bench/dl/resolve/main/" + f.path;
    const double curl = Seconds([&] { ASSERT_EQ(std::system(cmd.c_str()), 0); });
    std::printf(
        "HUB-BENCH download round %d: %lld bytes, turboquant %.2f s (%.0f MB/s), curl "
        "%.2f s (%.0f MB/s), ratio tq/curl time %.2f\n",
        round, (long long)total, tq, total / 1e6 / tq, curl, total / 1e6 / curl, tq / curl);
  }
}

}  // namespace
}  // namespace tq::test
