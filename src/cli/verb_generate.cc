// turboquant generate -m DIR (-p STR | --prompt-file FILE|- | --chat STR) [-n N] [--temp T]
//   [--top-k K] [--top-p P] [--min-p P] [--rep-penalty R] [--presence-penalty P]
//   [--frequency-penalty F] [-s SEED|-1] [--stop STR]...
//   [-t N] [--kv-dtype f16|bf16|f32] [-c N] [--truncate]
// The generated text alone goes to stdout, streamed; statistics go to stderr.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runtime_flags.h"
#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/error.h"
#include "core/sysinfo.h"
#include "io/model_config.h"
#include "model/expert_cache.h"
#include "model/model.h"
#include "runtime/chat.h"
#include "runtime/generator.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app("Generate text from a prompt, streamed to stdout", argv[0]);
  std::string model_dir, prompt, prompt_file, chat;
  int64_t max_tokens = 256, ctx = 0, seed = -1;
  float temp = 0, top_p = 1, min_p = 0, rep = 1, presence = 0, frequency = 0;
  int32_t top_k = 0;
  std::vector<std::string> stop;
  bool truncate = false;
  RuntimeFlags rt;
  AddModelFlag(app, &model_dir, "model directory or hub id ORG/NAME[@REV]");
  ModelFetchFlags fetch;
  AddModelFetchFlags(app, &fetch);
  auto* o_prompt = app.add_option("-p,--prompt", prompt, "raw prompt (special tokens added)");
  auto* o_file = app.add_option("-f,--prompt-file", prompt_file,
                                "raw prompt read from a file ('-' = standard input)");
  auto* o_chat = app.add_option("--chat", chat, "user message, wrapped with the chat template");
  o_prompt->excludes(o_chat)->excludes(o_file);
  o_file->excludes(o_chat);
  app.add_option("-n,--max-tokens", max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // Sampling flags are range-checked in CheckSamplingFlags (usage errors naming the flag).
  auto* o_temp = app.add_option("--temp", temp,
                                "temperature (0 = greedy; default from generation_config.json)");
  auto* o_top_k = app.add_option("--top-k", top_k, "top-k (0 = off)");
  auto* o_top_p = app.add_option("--top-p", top_p, "top-p, in (0, 1]");
  auto* o_min_p = app.add_option("--min-p", min_p, "min-p, in [0, 1]");
  auto* o_rep = app.add_option("--rep-penalty", rep, "repetition penalty (1 = off)");
  auto* o_presence = app.add_option("--presence-penalty", presence,
                                    "OpenAI presence penalty over generated tokens, in [-2, 2]");
  auto* o_frequency = app.add_option("--frequency-penalty", frequency,
                                     "OpenAI frequency penalty over generated tokens, in [-2, 2]");
  AddSeedFlag(app, &seed, "sampling seed");
  app.add_option("--stop", stop, "stop string (repeatable)")->take_all()->allow_extra_args(false);
  AddCtxFlag(app, &ctx,
             "context length in tokens (default: the model's max_position_embeddings, at most "
             "8192)");
  app.add_flag("--truncate", truncate, "keep the last tokens of a prompt longer than the context");
  AddRuntimeFlags(app, &rt);
  SetExamples(app, {
                       "turboquant generate -m models/tq-llama-21m -p 'The meaning of' -n 64",
                       "turboquant generate -m out/q4 --chat 'Write a haiku' --temp 0.7 -s 42",
                       "echo 'Once upon a time' | turboquant generate -m out/q4 --prompt-file -",
                   });
  return RunApp(app, argc, argv, [&] {
    model_dir = ResolveModelDir(model_dir, &fetch);
    if (o_prompt->count() == 0 && o_chat->count() == 0 && o_file->count() == 0) {
      throw UsageError("generate", "one of --prompt, --prompt-file or --chat is required");
    }
    if (o_file->count()) prompt = ReadPromptFile(prompt_file);
    auto check = [](const CLI::Option* o, const char* want, bool ok, double v) {
      if (o->count() && !ok) {
        throw UsageError("generate", fmt::format("{} must be {} (got {})", o->get_name(), want, v));
      }
    };
    check(o_temp, "a finite number >= 0", std::isfinite(temp) && temp >= 0, temp);
    check(o_top_k, ">= 0 (0 = off)", top_k >= 0, top_k);
    check(o_top_p, "in (0, 1]", top_p > 0 && top_p <= 1, top_p);
    check(o_min_p, "in [0, 1]", min_p >= 0 && min_p <= 1, min_p);
    check(o_rep, "a finite number > 0", std::isfinite(rep) && rep > 0, rep);
    check(o_presence, "in [-2, 2]", presence >= -2 && presence <= 2, presence);
    check(o_frequency, "in [-2, 2]", frequency >= -2 && frequency <= 2, frequency);
    ApplyThreads(rt);
    Timer load;
    auto tokenizer = Tokenizer::Load(model_dir);
    const TokenizerConfig tok_config = LoadTokenizerConfig(model_dir);
    const GenerationConfig gen_config = LoadGenerationConfig(model_dir);
    auto model = Model::Load(model_dir, LoadOptions(rt, model_dir, ctx));
    const double load_s = load.Seconds();

    GenerateOptions opts;
    opts.sampling = SamplingParamsFromConfig(gen_config);
    if (o_temp->count()) opts.sampling.temperature = temp;
    if (o_top_k->count()) opts.sampling.top_k = top_k;
    if (o_top_p->count()) opts.sampling.top_p = top_p;
    if (o_min_p->count()) opts.sampling.min_p = min_p;
    if (o_rep->count()) opts.sampling.repetition_penalty = rep;
    if (o_presence->count()) opts.sampling.presence_penalty = presence;
    if (o_frequency->count()) opts.sampling.frequency_penalty = frequency;
    opts.sampling.seed = ResolveSeed(seed);
    opts.stop = stop;

    std::vector<int32_t> ids;
    if (o_chat->count()) {
      // The rendered template holds its special tokens: encode without adding them again.
      // ordered_json: keys stay as written ("role" first), as in Python's dict.
      const nlohmann::ordered_json messages =
          nlohmann::ordered_json::array({{{"role", "user"}, {"content", chat}}});
      ids = tokenizer->Encode(RenderChatPrompt(tok_config, messages), false);
    } else {
      ids = tokenizer->Encode(prompt, true);
    }
    if (ids.empty()) throw UsageError("generate", "the prompt encodes to no tokens");
    const int64_t context = ctx > 0 ? ctx : DefaultContext(model->config());
    int64_t dropped = 0;
    try {
      opts.max_tokens = FitToContext(&ids, max_tokens, context, truncate, &dropped);
    } catch (const Error& e) {
      throw Error("generate", std::string(e.what()) + "; pass --truncate to keep its last tokens" +
                                  (ctx > 0 ? " or raise --ctx" : ""));
    }
    if (dropped > 0) {
      std::fprintf(stderr, "prompt truncated: dropped its first %lld tokens\n",
                   static_cast<long long>(dropped));
    }
    KvCacheOptions kv;
    ApplyKvOptions(rt, &kv);
    kv.max_tokens = int64_t(ids.size()) + opts.max_tokens;
    auto cache = model->NewCache(kv);

    Generator gen(*model, *tokenizer,
                  CollectEosIds(model->config(), gen_config, *tokenizer, tok_config.eos_token));
    const GenerateStats st = gen.Generate(ids, opts, *cache, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    // A terminal gets a final newline; a pipe gets exactly the generated text.
    if (isatty(fileno(stdout))) std::fputc('\n', stdout);
    std::fflush(stdout);
    std::fprintf(stderr,
                 "\n[load %.2f s] prompt %lld tokens, %.1f tok/s | generated %lld tokens, %.2f "
                 "tok/s | finish: %s | seed %llu\n",
                 load_s, static_cast<long long>(st.prompt_tokens), st.prefill_tok_s(),
                 static_cast<long long>(st.generated_tokens), st.decode_tok_s(),
                 FinishReasonName(st.finish), static_cast<unsigned long long>(opts.sampling.seed));
    std::fprintf(stderr, "[device %s]\n", model->backend().Describe().c_str());
    std::fprintf(stderr, "[kv cache %s] %lld bytes/token, %lld bytes for %lld tokens\n",
                 DescribeKvCache(kv).c_str(), static_cast<long long>(cache->BytesPerToken()),
                 static_cast<long long>(cache->MemoryBytes()),  // window layers: their window
                 static_cast<long long>(cache->size()));
    if (const ExpertCache* ec = model->expert_cache()) {
      const ExpertCacheStats e = ec->stats();
      const double tokens = double(std::max<int64_t>(1, st.prompt_tokens + st.generated_tokens));
      std::fprintf(stderr,
                   "[expert cache %lld of %lld experts, %.1f MiB] hit rate %.1f%% (%lld hits, "
                   "%lld misses, %lld prefetched), %.2f MiB read/token, stall %.1f ms/token\n",
                   static_cast<long long>(e.slots), static_cast<long long>(e.experts),
                   double(e.slots * e.slot_bytes) / double(1 << 20), 100 * e.hit_rate(),
                   static_cast<long long>(e.hits), static_cast<long long>(e.misses),
                   static_cast<long long>(e.prefetches),
                   double(e.bytes_read) / tokens / double(1 << 20), 1e3 * e.stall_seconds / tokens);
    }
    return kExitOk;
  });
}

VerbRegistrar reg("generate", "generate text from a prompt (streamed)", &Run);

}  // namespace
}  // namespace tq::cli
