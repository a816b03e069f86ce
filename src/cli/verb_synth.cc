// turboquant synth --like NAME --out DIR [--layers N] [--seed S]
#include <cstdio>

#include "cli/common_flags.h"
#include "cli/verb.h"
#include "convert/defaults.h"
#include "runtime/plan/plan_report.h"
#include "runtime/synth.h"
#include "runtime/synth_shapes.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app(
      "Write a random-weight checkpoint (bf16, or TurboQuant with --bits) with a real model's "
      "shapes",
      argv[0]);
  SynthOptions o;
  std::string names;
  for (const auto& s : SynthShapes()) {
    if (!s.test_only) names += (names.empty() ? "" : ", ") + s.name;
  }
  app.add_option("--like", o.like, "model shape: " + names)->required();
  app.add_option("-o,--out", o.out_dir, "output directory (must not exist)")->required();
  app.add_option("--layers", o.layers, "keep only the first N decoder layers (default: all)")
      ->check(CLI::PositiveNumber);
  app.add_option("-s,--seed", o.seed, "random seed")->capture_default_str();
  app.add_option("--bits", o.bits,
                 "write a TurboQuant checkpoint (2, 3, 4 or 8 bits, laid out as `convert --bits "
                 "N` would: 8-bit embedding and LM head, its group size; fp16 scales) with random "
                 "codes directly: no bf16 intermediate (default: bf16)");
  SetExamples(app, {"turboquant synth --like llama-3.1-8b -o /tmp/l3 --layers 2",
                    "turboquant synth --like qwen3-30b-a3b -o /tmp/moe -s 7",
                    "turboquant synth --like qwen3-30b-a3b --bits 4 -o /tmp/moe4"});
  return RunApp(app, argc, argv, [&] {
    // convert --bits N's defaults: 8-bit embedding / LM head, its group size (fp16 scales: synth
    // writes no e8 codes), so that the file reads about the bytes a converted one does a token.
    if (o.bits > 0) {
      o.embed_bits = kDefaultEmbedBits;
      o.group_size = DefaultGroupSize(o.bits);
    }
    const SynthResult r = WriteSynthCheckpoint(o);
    std::fprintf(stderr, "wrote %s: %lld tensors, %s in %lld shard(s)\n", o.out_dir.c_str(),
                 static_cast<long long>(r.num_tensors), HumanBytes(int64_t(r.total_bytes)).c_str(),
                 static_cast<long long>(r.num_shards));
    return kExitOk;
  });
}

VerbRegistrar reg("synth", "write a random-weight checkpoint with a real model's shapes", &Run);

}  // namespace
}  // namespace tq::cli
