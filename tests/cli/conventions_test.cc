// The command line people expect (issue 21): short flags, one context flag, `help VERB`,
// examples in --help, TURBOQUANT_* variables below their flags, conflicting flags and
// out-of-range values as usage errors that name the accepted range, detokenize's vocabulary.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_cli.h"

namespace tq {
namespace {

using test::RunCli;

bool Has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(CliConventions, HelpVerbIsVerbHelpAndEndsWithExamples) {
  for (const char* verb : {"generate", "serve", "convert", "bench", "plan", "doctor", "inspect",
                           "tokenize", "perplexity"}) {
    const auto a = RunCli(std::string("help ") + verb);
    const auto b = RunCli(std::string(verb) + " --help");
    EXPECT_EQ(a.code, 0) << verb << a.err;
    EXPECT_EQ(a.out, b.out) << verb;
    const size_t ex = a.out.find("Examples:");
    ASSERT_NE(ex, std::string::npos) << verb << ":\n" << a.out;
    EXPECT_NE(a.out.find(std::string("turboquant ") + verb, ex), std::string::npos) << verb;
  }
  EXPECT_EQ(RunCli("help no-such-verb").code, 2);
}

TEST(CliConventions, ShortFlagsAndOneContextName) {
  const auto g = RunCli("generate --help").out;
  for (const char* f : {"-m,", "-p,", "-n,", "-c,", "-t,", "-s,", "--prompt-file", "--ctx"})
    EXPECT_TRUE(Has(g, f)) << f << " missing from generate --help:\n" << g;
  const auto s = RunCli("serve --help").out;
  for (const char* f : {"-m,", "-c,", "-t,", "--cors", "--log-format", "TURBOQUANT_API_KEY"})
    EXPECT_TRUE(Has(s, f)) << f << " missing from serve --help";
  for (const char* verb : {"plan", "doctor", "bench", "perplexity"})
    EXPECT_TRUE(Has(RunCli(std::string(verb) + " --help").out, "-c,")) << verb;
}

TEST(CliConventions, ModelFromTheEnvironmentAndTheFlagWins) {
  const std::string model = test::ModelDir("tq-llama-21m");
  const auto env = RunCli("tokenize -p hello", "TURBOQUANT_MODEL=" + model);
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_EQ(env.out.front(), '[');
  const auto flag = RunCli("tokenize -m " + model + " -p hello", "TURBOQUANT_MODEL=/nonexistent");
  EXPECT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(flag.out, env.out);
  const auto wrong = RunCli("tokenize -p hello", "TURBOQUANT_MODEL=/nonexistent/model");
  EXPECT_EQ(wrong.code, 1);
  EXPECT_TRUE(Has(wrong.err, "/nonexistent/model")) << wrong.err;
}

TEST(CliConventions, PromptFromStdinAndRandomSeed) {
  const std::string model = test::ModelDir("tq-llama-21m");
  const auto a = RunCli("tokenize -m " + model + " -p 'Once upon a time'");
  const auto b = RunCli("tokenize -m " + model + " -f -", "", "Once upon a time");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const auto g =
      RunCli("generate -m " + model + " -f - -n 4 -s -1 --temp 0.8", "", "The cat sat on");
  EXPECT_EQ(g.code, 0) << g.err;
  EXPECT_TRUE(Has(g.err, "generated 4 tokens")) << g.err;
  const auto bad_seed = RunCli("generate -m " + model + " -p x -s -2");
  EXPECT_EQ(bad_seed.code, 2);
  EXPECT_TRUE(Has(bad_seed.err, "--seed")) << bad_seed.err;
}

TEST(CliConventions, ConflictingFlagsAreUsageErrors) {
  const std::string model = test::ModelDir("tq-llama-21m");
  test::TempDir dir;
  const auto c =
      RunCli("convert -m " + model + " -o " + dir.file("o") + " --budget-bpw 3.5 --attn-bits 4");
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(Has(c.err, "--budget-bpw") && Has(c.err, "--attn-bits")) << c.err;
  const auto p = RunCli("plan -m " + model + " --budget-bpw 3.5 --group-size 32");
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(Has(p.err, "--group-size")) << p.err;
  const auto g = RunCli("generate -m " + model + " -p a --chat b");
  EXPECT_EQ(g.code, 2);
}

TEST(CliConventions, OutOfRangeNumbersNameTheRangeAndAreNotEchoedInFull) {
  const std::string model = test::ModelDir("tq-llama-21m");
  const std::string huge(300, '9');
  const auto port = RunCli("serve -m " + model + " --port " + huge);
  EXPECT_EQ(port.code, 2);
  EXPECT_FALSE(Has(port.err, huge)) << port.err;
  EXPECT_TRUE(Has(port.err, "300 characters")) << port.err;
  EXPECT_TRUE(Has(port.err, "65535")) << port.err;
  EXPECT_EQ(port.err.rfind("turboquant serve: ", 0), 0u) << port.err;
  const auto ids = RunCli("detokenize -m " + model + " --ids " + huge);
  EXPECT_EQ(ids.code, 2);
  EXPECT_FALSE(Has(ids.err, huge)) << ids.err;
  EXPECT_TRUE(Has(ids.err, "0 to 2147483647")) << ids.err;
}

TEST(CliConventions, DetokenizeOutsideTheVocabularyNamesTheIdAndTheSize) {
  const std::string model = test::ModelDir("tq-llama-21m");
  const auto r = RunCli("detokenize -m " + model + " --ids 1,99999");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.err, "99999") && Has(r.err, "8191 tokens")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliConventions, DoctorReportsTheInstructionSetInUse) {
  const std::string model = test::ModelDir("tq-llama-21m");
  const auto r = RunCli("doctor -m " + model, "TURBOQUANT_ISA=scalar");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "cpu (scalar")) << r.out;
  EXPECT_TRUE(Has(r.out, "TURBOQUANT_ISA=scalar")) << r.out;
  EXPECT_TRUE(Has(r.out, "0 warn")) << r.out;
}

TEST(CliConventions, InspectSummaryByDefaultTensorsOnRequest) {
  const std::string model = test::ModelDir("tq-llama-21m");
  const auto s = RunCli("inspect -m " + model);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(Has(s.out, "parameters")) << s.out;
  EXPECT_TRUE(Has(s.out, "MiB")) << s.out;
  EXPECT_FALSE(Has(s.out, "model.layers.0.mlp.down_proj.weight")) << s.out;
  const auto t = RunCli("inspect -m " + model + " --tensors");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(Has(t.out, "model.layers.0.mlp.down_proj.weight")) << t.out;
}

}  // namespace
}  // namespace tq
