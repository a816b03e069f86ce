#include "cli/common_flags.h"

#include <cstdio>
#include <random>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/model_config.h"
#include "runtime/plan/memory_plan.h"

namespace tq::cli {

CLI::Option* AddModelFlag(CLI::App& app, std::string* dir, const std::string& what) {
  return app.add_option("-m,--model", *dir, what + " ($TURBOQUANT_MODEL)")
      ->envname("TURBOQUANT_MODEL")
      ->required();
}

CLI::Option* AddCtxFlag(CLI::App& app, int64_t* ctx, const std::string& what) {
  return app.add_option("-c,--ctx,--context", *ctx, what)
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
}

CLI::Option* AddSeedFlag(CLI::App& app, int64_t* seed, const std::string& what) {
  return app.add_option("-s,--seed", *seed, what + " (-1 = random)")
      ->check(CLI::Range(int64_t(-1), INT64_MAX));
}

CLI::Option* AddThreadsFlag(CLI::App& app, int* threads) {
  return app
      .add_option("-t,--threads", *threads, "CPU threads (0 = all cores; $TURBOQUANT_THREADS)")
      ->envname("TURBOQUANT_THREADS")
      ->check(CLI::Range(0, 4096));
}

int64_t DefaultContext(int64_t max_position_embeddings) {
  return DefaultContextTokens(max_position_embeddings);
}

int64_t DefaultContext(const ModelConfig& config) {
  return DefaultContext(config.max_position_embeddings);
}

uint64_t ResolveSeed(int64_t seed, const char* flag) {
  if (seed == -1) return std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  if (seed < 0) throw UsageError(flag, "must be -1 (random) or in [0, 2^63)");
  return uint64_t(seed);
}

void SetExamples(CLI::App& app, const std::vector<std::string>& examples) {
  std::string text = "\nExamples:\n";
  for (const auto& e : examples) text += "  " + e + "\n";
  app.footer(text);
}

std::string ReadPromptFile(const std::string& path) {
  if (path != "-") return ReadFileToString(path);
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) s.append(buf, n);
  if (std::ferror(stdin)) Fail("--prompt-file -", "cannot read standard input");
  return s;
}

}  // namespace tq::cli
