// The options every verb spells the same way (llama.cpp's short letters where they mean the
// same thing), with their environment variables: the flag wins over the variable.
//
//   -m, --model DIR      $TURBOQUANT_MODEL     the model directory
//   -c, --ctx N          (alias --context)     context length in tokens; DefaultContext()
//   -t, --threads N      $TURBOQUANT_THREADS   CPU threads (0 = all cores)
//   -s, --seed N         (-1 = random)
//   -p, --prompt TEXT / --prompt-file FILE ('-' = stdin); -n, --max-tokens N
//
// Every verb's --help ends with examples (SetExamples); `turboquant help VERB` prints it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace tq {
struct ModelConfig;
}

namespace tq::cli {

// -m/--model, required unless $TURBOQUANT_MODEL is set.
CLI::Option* AddModelFlag(CLI::App& app, std::string* dir,
                          const std::string& what = "model directory");
// -c/--ctx (alias --context): 0 = DefaultContext of the model.
CLI::Option* AddCtxFlag(CLI::App& app, int64_t* ctx, const std::string& what);
// -s/--seed: -1 (the default) = random.
CLI::Option* AddSeedFlag(CLI::App& app, int64_t* seed, const std::string& what);
// -t/--threads, $TURBOQUANT_THREADS.
CLI::Option* AddThreadsFlag(CLI::App& app, int* threads);

// The context used when -c is not given, by every verb that sizes a KV cache (generate, serve,
// plan, doctor): the model's max_position_embeddings, at most 8192 (4096 when the config does
// not say); runtime/plan/memory_plan.h DefaultContextTokens.
int64_t DefaultContext(const ModelConfig& config);
int64_t DefaultContext(int64_t max_position_embeddings);

// A seed flag's value: -1 -> a random one; other negatives are a usage error.
uint64_t ResolveSeed(int64_t seed, const char* flag = "--seed");

// Appends "Examples:" with one command per line to the verb's --help.
void SetExamples(CLI::App& app, const std::vector<std::string>& examples);

// --prompt-file FILE: the file's bytes; "-" reads standard input. tq::Error naming the file.
std::string ReadPromptFile(const std::string& path);

}  // namespace tq::cli
