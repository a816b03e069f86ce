// The KV compression flags (cli_kv_flags.h) on perplexity/bench/generate: bad values and
// combinations are usage errors (exit 2) naming the flag; a compressed run works and says so.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_cli.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using test::RunCli;

std::string Ppl(const std::string& flags) {
  return "perplexity --model " + test::ModelDir("tq-llama-21m") + " --file " +
         test::EvalFile("eval_other.txt") + " --max-tokens 64 --threads 1 " + flags;
}

TEST(KvFlags, BadValuesAndCombinationsNameTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-bits 5", "--kv-bits"},
      {"--kv-bits x", "--kv-bits"},
      {"--kv-bits 4 --kv-k-bits 8 --kv-v-bits 4", "--kv-bits"},
      {"--kv-k-bits 8", "--kv-v-bits"},
      {"--kv-v-bits 3", "--kv-k-bits"},
      {"--kv-window 16", "--kv-window"},
      {"--kv-sink 4", "--kv-sink"},
      {"--kv-boundary 1", "--kv-boundary"},
      {"--kv-bits 4 --kv-scale best", "--kv-scale"},
      {"--kv-bits 4 --kv-codebook beta", "--kv-codebook"},
      {"--kv-bits 8 --kv-qjl", "--kv-qjl"},
      {"--kv-k-bits 8 --kv-v-bits 4 --kv-qjl", "--kv-qjl"},
      {"--kv-qjl", "--kv-qjl"},
      {"--kv-bits 4 --kv-window -1", "--kv-window"},
      {"--kv-center 32", "--kv-center"},
      {"--kv-bits 4 --kv-center -2", "--kv-center"},
      {"--kv-seed 7", "--kv-seed"},
      {"--kv-bits 4 --kv-seed -1", "--kv-seed"},
      {"--kv-outliers 32", "--kv-outliers"},
      {"--kv-bits 3 --kv-outliers 16", "--kv-outliers"},
      {"--kv-bits 3 --kv-outliers -32", "--kv-outliers"},
      {"--kv-bits 4 --kv-outliers 32", "--kv-outliers"},
      {"--kv-k-bits 8 --kv-v-bits 4 --kv-outliers 32", "--kv-outliers"},
  };
  for (auto [flags, name] : cases) {
    const test::CliResult r = RunCli(Ppl(flags));
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << flags << "\n" << r.err;
  }
}

TEST(KvFlags, CompressedPerplexityAndBenchRun) {
  const test::CliResult r = RunCli(
      Ppl("--kv-k-bits 8 --kv-v-bits 3.5 --kv-window 8 --kv-scale mse --kv-center 16 --json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"ppl\""), std::string::npos);
  const test::CliResult b =
      RunCli("bench --model " + test::ModelDir("tq-llama-21m") +
             " --prompt-tokens 16 --gen-tokens 2 --threads 1 --kv-bits 4 --json");
  ASSERT_EQ(b.code, 0) << b.err;
  // 6 layers x 2 kv heads x (32 + 2 + 32 + 2) bytes.
  EXPECT_NE(b.out.find("\"kv_bytes_per_token\":816"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("K4V4"), std::string::npos) << b.out;
}

// --kv-qjl: keys at k-1 bits + sign bits and an fp16 residual norm; perplexity and bench run and
// say so, with the exact bytes per token.
TEST(KvFlags, QjlRunsAndCountsItsBytes) {
  const test::CliResult r = RunCli(Ppl("--kv-k-bits 4 --kv-v-bits 3 --kv-qjl --json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"ppl\""), std::string::npos);
  const test::CliResult b =
      RunCli("bench --model " + test::ModelDir("tq-llama-21m") +
             " --prompt-tokens 16 --gen-tokens 2 --threads 1 --kv-bits 4 --kv-qjl --json");
  ASSERT_EQ(b.code, 0) << b.err;
  // 6 layers x 2 kv heads x (K: 24 code bytes + 2 scale + 8 sign + 2 norm; V: 32 + 2).
  EXPECT_NE(b.out.find("\"kv_bytes_per_token\":840"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("K4+qjlV4"), std::string::npos) << b.out;
}

// --kv-outliers: the split runs, is described, and costs one more fp16 scale per split vector.
TEST(KvFlags, OutliersRunAndCountTheirBytes) {
  const test::CliResult r = RunCli(Ppl("--kv-bits 3 --kv-outliers 32 --json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"ppl\""), std::string::npos);
  const test::CliResult b =
      RunCli("bench --model " + test::ModelDir("tq-llama-21m") +
             " --prompt-tokens 16 --gen-tokens 2 --threads 1 --kv-bits 3 --kv-outliers 32 --json");
  ASSERT_EQ(b.code, 0) << b.err;
  // 6 layers x 2 kv heads x 2 x (32 codes at 4 bits + 32 at 2 = 24 bytes, 2 fp16 scales).
  EXPECT_NE(b.out.find("\"kv_bytes_per_token\":672"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("outliers 32"), std::string::npos) << b.out;
}

// --kv-seed picks the rotation signs: the same seed reproduces a run, another seed changes it.
TEST(KvFlags, SeedPicksTheRotation) {
  auto ppl = [](const std::string& seed) {
    const test::CliResult r = RunCli(Ppl("--kv-bits 3 --kv-seed " + seed + " --json"));
    EXPECT_EQ(r.code, 0) << r.err;
    const size_t at = r.out.find("\"nll\":");
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? r.out : r.out.substr(at, r.out.find(',', at) - at);
  };
  const std::string a = ppl("1"), b = ppl("2");
  EXPECT_EQ(a, ppl("1"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace tq
