// The binary's contract: verbs with --help, exit code 2 for usage errors, errors on stderr.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_cli.h"

namespace tq {
namespace {

using Result = test::CliResult;
using test::RunCli;

TEST(Cli, NoArgumentsIsAUsageError) {
  const auto r = RunCli("");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("Usage: turboquant <verb>"), std::string::npos);
}

TEST(Cli, HelpListsVerbs) {
  const auto r = RunCli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Verbs:"), std::string::npos);
}

TEST(Cli, UnknownVerbIsAUsageError) {
  const auto r = RunCli("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown verb 'frobnicate'"), std::string::npos);
}

// Every verb listed by --help answers its own --help with exit 0, and an unknown flag with 2.
TEST(Cli, EveryVerbHasHelpAndRejectsUnknownFlags) {
  const auto help = RunCli("--help");
  size_t pos = help.out.find("Verbs:");
  ASSERT_NE(pos, std::string::npos);
  int verbs = 0;
  for (size_t line = help.out.find('\n', pos) + 1; line < help.out.size();) {
    const size_t end = help.out.find('\n', line);
    const std::string text = help.out.substr(line, end - line);
    line = end + 1;
    if (text.rfind("  ", 0) != 0) break;
    const std::string verb = text.substr(2, text.find(' ', 2) - 2);
    ++verbs;
    const auto h = RunCli(verb + " --help");
    EXPECT_EQ(h.code, 0) << verb;
    EXPECT_FALSE(h.out.empty()) << verb;
    const auto bad = RunCli(verb + " --no-such-flag-xyz");
    EXPECT_EQ(bad.code, 2) << verb << ": " << bad.err;
    EXPECT_FALSE(bad.err.empty()) << verb;
  }
  EXPECT_GT(verbs, 0);
}

}  // namespace
}  // namespace tq
