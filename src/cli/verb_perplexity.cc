// turboquant perplexity -m DIR -f FILE [-c 512] [--max-tokens 65536] [-t N]
//   [--kv-dtype f16|bf16|f32] [--json]
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runtime_flags.h"
#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/mapped_file.h"
#include "core/sysinfo.h"
#include "kv/turboquant_kv_cache.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app("Perplexity of a text file (protocol of models/README.md)", argv[0]);
  std::string model_dir, file;
  PerplexityOptions o;
  RuntimeFlags rt;
  bool json = false;
  AddModelFlag(app, &model_dir);
  app.add_option("-f,--file", file, "UTF-8 text file ('-' = standard input)")->required();
  app.add_option("-c,--ctx,--context", o.ctx,
                 "window length in tokens (the protocol's 512 by default)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 30));
  app.add_option("--max-tokens", o.max_tokens, "evaluate the first N tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 40));
  AddRuntimeFlags(app, &rt);
  app.add_flag("--json", json, "print one JSON object on stdout");
  bool kv_stats = false;
  app.add_flag("--kv-stats", kv_stats,
               "with a compressed KV cache: also decode every coded vector and report the mean "
               "and smallest roundtrip cosine of keys and values (costs a decode per vector)");
  SetExamples(app, {"turboquant perplexity -m out/q4 -f ../shared/eval/eval_brown.txt",
                    "turboquant perplexity -m out/q4 -f book.txt -c 1024 --kv-bits 4 --json"});
  return RunApp(app, argc, argv, [&] {
    model_dir = ResolveModelDir(model_dir);
    ApplyThreads(rt);
    ApplyKvOptions(rt, &o.kv);
    o.kv.roundtrip_stats = kv_stats;
    const std::string text = ReadPromptFile(file);
    Timer load;
    auto tokenizer = Tokenizer::Load(model_dir);
    auto model = Model::Load(model_dir, LoadOptions(rt, model_dir, o.ctx));
    const std::vector<int32_t> ids = tokenizer->Encode(text, /*add_special_tokens=*/false);
    if (!json) {
      std::fprintf(stderr, "loaded %s in %.1f s; %s: %zu tokens\n", model_dir.c_str(),
                   load.Seconds(), file.c_str(), ids.size());
    }
    const PerplexityResult r = ComputePerplexity(*model, ids, o);
    if (json) {
      nlohmann::json j = {{"ppl", r.ppl},         {"nll", r.nll},
                          {"tokens", r.tokens},   {"windows", r.windows},
                          {"seconds", r.seconds}, {"input_tokens", r.input_tokens},
                          {"ctx", o.ctx}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf(
          "perplexity %.4f  nll %.6f  tokens %lld predicted (of %lld)  windows %lld  %.1f s\n",
          r.ppl, r.nll, static_cast<long long>(r.tokens), static_cast<long long>(r.input_tokens),
          static_cast<long long>(r.windows), r.seconds);
    }
    if (kv_stats) {
      const KvRoundtripStats st = GlobalKvRoundtripStats();
      std::fprintf(stderr,
                   "kv roundtrip cosine: K mean %.6f min %.6f (%lld vectors), V mean %.6f min "
                   "%.6f (%lld vectors)\n",
                   st.k_mean(), st.k_cos_min, static_cast<long long>(st.k_count), st.v_mean(),
                   st.v_cos_min, static_cast<long long>(st.v_count));
    }
    return kExitOk;
  });
}

VerbRegistrar reg("perplexity", "perplexity of a text file", &Run);

}  // namespace
}  // namespace tq::cli
