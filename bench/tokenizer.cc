// Tokenizer encode/decode speed on English prose (eval_brown.txt), for both shared models.
// Run: bench_tokenizer [--benchmark_filter=Encode]; bytes_per_second is the figure to report.
#include "tokenizer/tokenizer.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "core/mapped_file.h"

namespace {

std::string SharedDir() {
  if (const char* env = std::getenv("TQ_SHARED_DIR"); env && *env) return env;
  return TQ_DEFAULT_SHARED_DIR;
}

const std::string& Prose() {
  static const std::string text = tq::ReadFileToString(SharedDir() + "/eval/eval_brown.txt");
  return text;
}

// Encodes the whole file per iteration (as the perplexity protocol does).
void BM_EncodeFile(benchmark::State& state, const char* model) {
  const auto tok = tq::Tokenizer::Load(SharedDir() + "/models/" + model);
  const std::string& text = Prose();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n);
}

// Encodes line by line (chat-sized inputs).
void BM_EncodeLines(benchmark::State& state, const char* model) {
  const auto tok = tq::Tokenizer::Load(SharedDir() + "/models/" + model);
  const std::string& text = Prose();
  for (auto _ : state) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t e = text.find('\n', pos);
      e = e == std::string::npos ? text.size() : e + 1;
      auto ids = tok->Encode(std::string_view(text).substr(pos, e - pos), true);
      benchmark::DoNotOptimize(ids.data());
      pos = e;
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}

void BM_Decode(benchmark::State& state, const char* model) {
  const auto tok = tq::Tokenizer::Load(SharedDir() + "/models/" + model);
  const auto ids = tok->Encode(Prose(), false);
  for (auto _ : state) {
    std::string s = tok->Decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(Prose().size()));
}

BENCHMARK_CAPTURE(BM_EncodeFile, llama, "tq-llama-21m")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeFile, qwen3moe, "tq-qwen3moe-17m")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeLines, llama, "tq-llama-21m")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeLines, qwen3moe, "tq-qwen3moe-17m")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, llama, "tq-llama-21m")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, qwen3moe, "tq-qwen3moe-17m")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
