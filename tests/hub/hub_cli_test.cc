// The binary with hub ids: plan over HTTP (headers only) equals plan on the local copy, download,
// --model ORG/NAME from the cache (offline), the error that gives the download command, GGUF.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "hub/fake_hub.h"
#include "testutil/testutil.h"

namespace tq::test {
namespace {

namespace fs = std::filesystem;

class HubCli : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
      const std::string dir = fs::path(RequireFile(ModelDir(m) + "/config.json")).parent_path();
      hub_.AddRepoFromDir(std::string("tq/") + m, dir);
    }
    hub_.AddRepoFromDir("tq/gated", ModelDir("tq-llama-21m"), /*gated=*/true);
  }
  // The binary against the fake hub, with an empty cache of this test's own.
  std::string Env(const std::string& extra = "") const {
    return "env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN -u HF_HOME -u HF_HUB_OFFLINE "
           "HF_TOKEN_PATH=/nonexistent HF_ENDPOINT=" +
           hub_.endpoint() + " HF_HUB_CACHE=" + ShellQuote(cache_.path().string()) + " " + extra +
           " ";
  }
  CliResult Cli(const std::string& args, const std::string& extra_env = "") {
    return RunCliWithEnv(Env(extra_env), args);
  }
  static CliResult RunCliWithEnv(const std::string& env, const std::string& args) {
    TempDir dir;
    const std::string err_file = dir.file("stderr");
    const std::string cmd = env + CliPath() + " " + args + " 2>" + err_file;
    FILE* p = popen(cmd.c_str(), "r");
    CliResult r{-1, "", ""};
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    FILE* e = fopen(err_file.c_str(), "r");
    while (e && (n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    if (e) fclose(e);
    return r;
  }

  FakeHub hub_;
  TempDir cache_;
};

// plan --json of a hub id over HTTP and of the same files on disk: the same verdict and numbers.
TEST_F(HubCli, PlanOverHttpEqualsPlanOnTheLocalCopyAndReadsLittle) {
  for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    SCOPED_TRACE(m);
    const std::string flags = " --json --ram-gb 8 --context 4096 --threads 2";
    hub_.Reset();
    const CliResult remote = Cli(std::string("plan --model tq/") + m + flags);
    ASSERT_EQ(remote.code, 0) << remote.err << remote.out;
    const int64_t served = hub_.body_bytes;
    for (const std::string& q : hub_.Requests()) {
      if (q.find(".safetensors") != std::string::npos || q.find("/cdn/") != std::string::npos) {
        EXPECT_NE(q.find("Range: bytes="), std::string::npos) << "a whole shard was asked: " << q;
      }
    }
    const CliResult local = Cli("plan --model " + ShellQuote(ModelDir(m)) + flags);
    ASSERT_EQ(local.code, 0) << local.err;
    nlohmann::json r = nlohmann::json::parse(remote.out), l = nlohmann::json::parse(local.out);
    const nlohmann::json hub = r["hub"];
    r.erase("hub");
    r.erase("model_dir");
    l.erase("model_dir");
    EXPECT_EQ(r.dump(1), l.dump(1));
    EXPECT_EQ(hub["commit"], hub_.repo(std::string("tq/") + m).commit);
    EXPECT_LT(hub["bytes_read"].get<int64_t>(), 1 << 20);
    EXPECT_LT(served, 1 << 20);  // what the server sent, redirects and errors included
    EXPECT_GE(served, hub["bytes_read"].get<int64_t>());
    int64_t files_bytes = 0;
    for (const auto& f : hub_.repo(std::string("tq/") + m).files) files_bytes += f.data.size();
    EXPECT_EQ(hub["download_bytes"].get<int64_t>(), files_bytes);
    EXPECT_EQ(hub["download_command"], std::string("turboquant download tq/") + m);
  }
  // The text form says what was read and what a download takes.
  const CliResult text = Cli("plan --model tq/tq-llama-21m --ram-gb 8");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("over HTTP: read"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("turboquant download tq/tq-llama-21m"), std::string::npos) << text.out;
}

TEST_F(HubCli, PlanOverHttpErrors) {
  CliResult r = Cli("plan --model tq/gated --ram-gb 8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("gated or private"), std::string::npos) << r.err;
  r = Cli("plan --model tq/gated --ram-gb 8 --token " + std::string(FakeHub::kToken));
  EXPECT_EQ(r.code, 0) << r.err;
  r = Cli("plan --model tq/nothing --ram-gb 8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.err;
  r = Cli("plan --model tq/tq-llama-21m --ram-gb 8", "HF_HUB_OFFLINE=1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("HF_HUB_OFFLINE"), std::string::npos) << r.err;
}

TEST_F(HubCli, DownloadThenUseTheIdOffline) {
  // Not cached: the error gives the exact command.
  CliResult r = Cli("generate --model tq/tq-llama-21m --prompt hi --max-tokens 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("turboquant download tq/tq-llama-21m\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--download"), std::string::npos) << r.err;
  r = Cli("inspect --model tq/tq-llama-21m@v2");
  EXPECT_NE(r.err.find("turboquant download tq/tq-llama-21m --revision v2"), std::string::npos)
      << r.err;

  r = Cli("download tq/tq-llama-21m --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::string commit = hub_.repo("tq/tq-llama-21m").commit;
  EXPECT_EQ(j["commit"], commit);
  EXPECT_TRUE(fs::is_directory(j["snapshot"].get<std::string>()));

  // Now from the cache, with no network at all: the startup line names the snapshot.
  const std::string offline = "HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:1";
  r = Cli("inspect --model tq/tq-llama-21m --json", offline);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("model tq/tq-llama-21m: snapshot " + commit), std::string::npos) << r.err;
  r = Cli("plan --model tq/tq-llama-21m --ram-gb 8 --json", offline);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).count("hub"), 0u);  // local: no HTTP section
  r = Cli("generate --model tq/tq-llama-21m@" + commit + " --prompt Hello --max-tokens 3", offline);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
}

TEST_F(HubCli, GenerateWithDownloadFetchesFirst) {
  const CliResult r =
      Cli("generate --model tq/tq-llama-21m --download --prompt Hello --max-tokens 3");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("downloaded tq/tq-llama-21m"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("snapshot " + hub_.repo("tq/tq-llama-21m").commit), std::string::npos);
}

TEST_F(HubCli, DownloadErrorsAndUsage) {
  CliResult r = Cli("download tq/gated");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--token"), std::string::npos) << r.err;
  r = Cli("download tq/gated -q --token " + std::string(FakeHub::kToken));
  EXPECT_EQ(r.code, 0) << r.err;
  r = Cli("download not-an-id");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not a hub id"), std::string::npos) << r.err;
  r = Cli("download a/b@x --revision y");
  EXPECT_EQ(r.code, 2);
  r = Cli("download tq/tq-llama-21m", "HF_HUB_OFFLINE=1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("HF_HUB_OFFLINE"), std::string::npos) << r.err;
  r = Cli("download --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--include"), std::string::npos);
}

TEST_F(HubCli, GgufAndMissingPathsSayWhatTheyAre) {
  TempDir t;
  std::string gguf = "GGUF";
  const uint32_t version = 3;
  const uint64_t counts[2] = {201, 19};
  gguf.append(reinterpret_cast<const char*>(&version), 4);
  gguf.append(reinterpret_cast<const char*>(counts), 16);
  WriteFile(t.file("m.gguf"), gguf);
  for (const char* verb : {"inspect", "plan", "doctor", "tokenize --text hi"}) {
    const CliResult r = Cli(std::string(verb) + " --model " + ShellQuote(t.file("m.gguf")));
    EXPECT_EQ(r.code, 1) << verb;
    EXPECT_NE(r.err.find("is a GGUF file (GGUF version 3, 201 tensors)"), std::string::npos)
        << verb << ": " << r.err;
  }
  const CliResult r = Cli("inspect --model ./no/such/dir");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no such directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tq::test
