// Without --expert-cache, an MoE model that does not fit in memory streams its experts with the
// cache `turboquant plan` recommends (cli_runtime_flags.h, PlannedExpertCache): the run says so on
// stderr and gives the same tokens as with every expert resident; --expert-cache all keeps them
// resident; a broken $TURBOQUANT_RAM_GB is a usage error naming it.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_cli.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using test::RunCli;

// Small enough that tq-qwen3moe-17m (bf16, ~34 MB of weights) does not fit, large enough that it
// fits with its experts streamed (checked against `turboquant plan --ram-gb`).
const char* kTightRam = "TURBOQUANT_RAM_GB=0.05";

std::string Generate(const std::string& extra = "") {
  return "generate --model " + test::ModelDir("tq-qwen3moe-17m") +
         " --prompt 'The sky is' --max-tokens 12 --temp 0 --threads 1 " + extra;
}

TEST(ExpertCacheDefault, AModelThatDoesNotFitStreamsItsExpertsWithPlansCache) {
  test::RequireFile(test::ModelDir("tq-qwen3moe-17m") + "/model.safetensors");
  const test::CliResult resident = RunCli(Generate());
  ASSERT_EQ(resident.code, 0) << resident.err;
  EXPECT_EQ(resident.err.find("[expert cache"), std::string::npos) << resident.err;

  const test::CliResult tight = RunCli(Generate(), kTightRam);
  ASSERT_EQ(tight.code, 0) << tight.err;
  EXPECT_NE(tight.err.find("[expert cache] the model needs"), std::string::npos) << tight.err;
  EXPECT_NE(tight.err.find("as `turboquant plan` recommends"), std::string::npos) << tight.err;
  EXPECT_NE(tight.err.find("hit rate"), std::string::npos) << tight.err;  // the cache's summary
  EXPECT_EQ(tight.out, resident.out);

  const test::CliResult all = RunCli(Generate("--expert-cache all"), kTightRam);
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.err.find("[expert cache"), std::string::npos) << all.err;
  EXPECT_EQ(all.out, resident.out);

  const test::CliResult bad = RunCli(Generate(), "TURBOQUANT_RAM_GB=lots");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("TURBOQUANT_RAM_GB"), std::string::npos) << bad.err;
}

// The default plans the run's own context: at 0.06 GiB the model fits with a 64-token cache but
// not with a 4096-token one (checked against `turboquant plan --ram-gb 0.06 --ctx`).
TEST(ExpertCacheDefault, PlansTheContextOfTheRun) {
  test::RequireFile(test::ModelDir("tq-qwen3moe-17m") + "/model.safetensors");
  const char* ram = "TURBOQUANT_RAM_GB=0.06";
  const test::CliResult small = RunCli(Generate("--ctx 64"), ram);
  ASSERT_EQ(small.code, 0) << small.err;
  EXPECT_EQ(small.err.find("[expert cache"), std::string::npos) << small.err;
  const test::CliResult large = RunCli(Generate("--ctx 4096"), ram);
  ASSERT_EQ(large.code, 0) << large.err;
  EXPECT_NE(large.err.find("[expert cache] the model needs"), std::string::npos) << large.err;
  EXPECT_NE(large.err.find("at context 4096"), std::string::npos) << large.err;
  EXPECT_EQ(large.out, small.out);
}

}  // namespace
}  // namespace tq
