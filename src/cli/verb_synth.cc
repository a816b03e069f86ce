// turboquant synth --like NAME --out DIR [--layers N] [--seed S]
#include <cstdio>

#include "cli/verb.h"
#include "runtime/synth.h"
#include "runtime/synth_shapes.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app("Write a random-weight bf16 Hugging Face checkpoint with a real model's shapes",
               argv[0]);
  SynthOptions o;
  std::string names;
  for (const auto& s : SynthShapes()) {
    if (!s.test_only) names += (names.empty() ? "" : ", ") + s.name;
  }
  app.add_option("--like", o.like, "model shape: " + names)->required();
  app.add_option("--out", o.out_dir, "output directory (must not exist)")->required();
  app.add_option("--layers", o.layers, "keep only the first N decoder layers (default: all)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  return RunApp(app, argc, argv, [&] {
    const SynthResult r = WriteSynthCheckpoint(o);
    std::fprintf(stderr, "wrote %s: %lld tensors, %.2f GB in %lld shard(s)\n", o.out_dir.c_str(),
                 static_cast<long long>(r.num_tensors), double(r.total_bytes) / 1e9,
                 static_cast<long long>(r.num_shards));
    return kExitOk;
  });
}

VerbRegistrar reg("synth", "write a random-weight checkpoint with a real model's shapes", &Run);

}  // namespace
}  // namespace tq::cli
