// turboquant perplexity --model DIR --file F [--ctx 512] [--max-tokens 65536] [--threads N]
//   [--kv-dtype f16|bf16|f32] [--json]
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runtime_flags.h"
#include "cli/verb.h"
#include "core/mapped_file.h"
#include "core/sysinfo.h"
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
  app.add_option("--model", model_dir, "model directory")->required();
  app.add_option("--file", file, "UTF-8 text file")->required();
  app.add_option("--ctx", o.ctx, "window length in tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 30));
  app.add_option("--max-tokens", o.max_tokens, "evaluate the first N tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 40));
  AddRuntimeFlags(app, &rt);
  app.add_flag("--json", json, "print one JSON object on stdout");
  return RunApp(app, argc, argv, [&] {
    ApplyThreads(rt);
    ApplyKvOptions(rt, &o.kv);
    const std::string text = ReadFileToString(file);
    Timer load;
    auto tokenizer = Tokenizer::Load(model_dir);
    auto model = Model::Load(model_dir, LoadOptions(rt));
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
    return kExitOk;
  });
}

VerbRegistrar reg("perplexity", "perplexity of a text file", &Run);

}  // namespace
}  // namespace tq::cli
