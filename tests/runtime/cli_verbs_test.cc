// The runtime verbs through the built binary: stdout carries only the result (generated text,
// JSON), statistics and progress go to stderr, errors give the documented exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/mapped_file.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result RunCli(const std::string& args) {
  const std::string bin = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant");
  test::TempDir dir;
  const std::string err_file = dir.file("stderr");
  const std::string cmd = bin + " " + args + " 2>" + err_file;
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, "", ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadFileToString(err_file);
  return r;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TEST(CliVerbs, GenerateGreedyPrintsOnlyTheContinuation) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  const auto ref = nlohmann::json::parse(ReadFileToString(dir + "/reference.json"));
  const Result r = RunCli("generate --model " + dir + " --prompt " + Quote(ref["prompt"]) +
                          " --temp 0 --max-tokens 12 --threads 2");
  ASSERT_EQ(r.code, 0) << r.err;
  // The golden greedy text decodes the continuation alone; ours keeps the leading space.
  std::string out = r.out;
  out.erase(0, out.find_first_not_of(' '));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(ref["greedy_text"].get<std::string>().compare(0, out.size(), out), 0)
      << "stdout: '" << r.out << "'";
  EXPECT_NE(r.err.find("generated 12 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST(CliVerbs, GenerateStopStringAndChat) {
  const std::string dir = test::ModelDir("tq-qwen3moe-17m");
  const Result all = RunCli("generate --model " + dir + " --prompt 'The dictionary' --temp 0 " +
                            "--max-tokens 24");
  ASSERT_EQ(all.code, 0) << all.err;
  ASSERT_GT(all.out.size(), 8u);
  // Stop at a string from the middle of the greedy output: the text before it, nothing more.
  const std::string stop = all.out.substr(all.out.size() / 2, 3);
  const Result cut = RunCli("generate --model " + dir + " --prompt 'The dictionary' --temp 0 " +
                            "--max-tokens 24 --stop " + Quote(stop));
  ASSERT_EQ(cut.code, 0) << cut.err;
  EXPECT_EQ(cut.out, all.out.substr(0, all.out.find(stop)));
  EXPECT_NE(cut.err.find("finish: stop"), std::string::npos) << cut.err;
  const Result chat =
      RunCli("generate --model " + dir + " --chat 'What is a word?' --max-tokens 4 " + "--seed 5");
  EXPECT_EQ(chat.code, 0) << chat.err;
  EXPECT_NE(chat.err.find("prompt 15 tokens"), std::string::npos) << chat.err;
}

TEST(CliVerbs, GenerateErrors) {
  const std::string dir = test::ModelDir("tq-qwen3moe-17m");
  const Result both = RunCli("generate --model " + dir + " --prompt a --chat b");
  EXPECT_EQ(both.code, 2);
  const Result none = RunCli("generate --model " + dir);
  EXPECT_EQ(none.code, 2);
  const Result overflow =
      RunCli("generate --model " + dir + " --prompt 'one two three four five six seven' --ctx 4");
  EXPECT_EQ(overflow.code, 1);
  EXPECT_NE(overflow.err.find("context of 4 tokens"), std::string::npos) << overflow.err;
  EXPECT_TRUE(overflow.out.empty());
  const Result truncated =
      RunCli("generate --model " + dir +
             " --prompt 'one two three four five six seven' --ctx 4 --truncate "
             "--max-tokens 2");
  EXPECT_EQ(truncated.code, 0) << truncated.err;
  EXPECT_NE(truncated.err.find("prompt truncated"), std::string::npos) << truncated.err;
}

TEST(CliVerbs, GenerateSamplingFlagErrorsAreUsageErrors) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  const std::pair<const char*, const char*> bad[] = {
      {"--temp -1", "--temp"},
      {"--temp nan", "--temp"},
      {"--temp inf", "--temp"},
      {"--top-k -5", "--top-k"},
      {"--top-p 0", "--top-p"},
      {"--top-p 1.5", "--top-p"},
      {"--top-p nan", "--top-p"},
      {"--min-p 2", "--min-p"},
      {"--rep-penalty 0", "--rep-penalty"},
      {"--presence-penalty 3", "--presence-penalty"},
      {"--frequency-penalty -2.5", "--frequency-penalty"},
      {"--top-k x", "--top-k"}};
  for (const auto& [args, flag] : bad) {
    const Result r = RunCli("generate --model " + dir + " --prompt hi --max-tokens 1 " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

TEST(CliVerbs, GeneratePresenceAndFrequencyPenalties) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  const std::string base = "generate --model " + dir + " --prompt 'the the the' --temp 0 " +
                           "--max-tokens 16 --threads 2";
  const Result plain = RunCli(base);
  ASSERT_EQ(plain.code, 0) << plain.err;
  // A huge frequency penalty forbids repeating any generated token under greedy decoding.
  const Result pen = RunCli(base + " --frequency-penalty 2 --presence-penalty 2");
  ASSERT_EQ(pen.code, 0) << pen.err;
  EXPECT_NE(pen.out, plain.out);
}

TEST(CliVerbs, PerplexityJson) {
  const Result r = RunCli("perplexity --model " + test::ModelDir("tq-qwen3moe-17m") + " --file " +
                          test::EvalFile("eval_other.txt") + " --ctx 100 --max-tokens 250 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"], 250 - 3);
  EXPECT_EQ(j["windows"], 3);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_NEAR(std::exp(j["nll"].get<double>()), j["ppl"].get<double>(), 1e-6);
  EXPECT_TRUE(j.contains("seconds"));
  EXPECT_NE(r.err.find("perplexity"), std::string::npos);  // the progress bar
}

TEST(CliVerbs, SynthThenBenchJson) {
  test::TempDir tmp;
  const std::string out = tmp.file("m");
  const Result s = RunCli("synth --like tiny-qwen3-moe --out " + out + " --layers 1 --seed 3");
  ASSERT_EQ(s.code, 0) << s.err;
  const Result again = RunCli("synth --like tiny-qwen3-moe --out " + out);
  EXPECT_EQ(again.code, 2) << again.err;  // exists
  const Result bad = RunCli("synth --like nope --out " + tmp.file("x"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("llama-3.2-1b"), std::string::npos);
  const Result b = RunCli("bench --model " + out + " --prompt-tokens 8 --gen-tokens 4 --json");
  ASSERT_EQ(b.code, 0) << b.err;
  const auto j = nlohmann::json::parse(b.out);
  for (const char* key :
       {"prefill_tok_s", "decode_tok_s", "peak_rss_bytes", "model_bytes", "kv_bytes_per_token"}) {
    EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_EQ(j["logits_finite"], true);
  const Result ctx =
      RunCli("bench --model " + out +
             " --prompt-tokens 4 --gen-tokens 2 --context 64 --context-fill synthetic "
             "--json");
  ASSERT_EQ(ctx.code, 0) << ctx.err;
  EXPECT_EQ(nlohmann::json::parse(ctx.out)["context_fill"], "synthetic");
}

}  // namespace
}  // namespace tq
