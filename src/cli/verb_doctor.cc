// turboquant doctor --model DIR [--context N] [--ram-gb X] [--json]
// Read-only readiness checks of a model directory and this machine; exit 0 when nothing fails.
#include <cstdio>
#include <filesystem>

#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "hub/hub_id.h"
#include "runtime/doctor/doctor.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app{
      "Check a model directory and this machine: files, config, tensors, TurboQuant format, "
      "tokenizer, chat template, CPU/CUDA, memory (read-only; each line ok, warn or fail)",
      argv[0]};
  DoctorOptions o;
  std::optional<double> ram_gb;
  bool json = false;
  AddModelFlag(app, &o.model_dir);
  AddCtxFlag(app, &o.context,
             "context for the memory check (default: max_position_embeddings, at most 8192)");
  app.add_option("--ram-gb", ram_gb, "usable memory in GiB for the memory check")
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print one JSON object");
  SetExamples(app, {"turboquant doctor -m out/q4",
                    "TURBOQUANT_ISA=avx2 turboquant doctor -m out/q4 -c 32768 --json"});
  return RunApp(app, argc, argv, [&] {
    // Hub ids and files (GGUF) are resolved here; a missing directory is one of doctor's checks.
    std::error_code ec;
    if (std::filesystem::exists(o.model_dir, ec) || hub::ParseHubId(o.model_dir))
      o.model_dir = ResolveModelDir(o.model_dir);
    o.ram_gb = ram_gb;
    const DoctorReport r = RunDoctor(o);
    if (json) {
      std::printf("%s\n", DoctorToJson(r).dump(2).c_str());
    } else {
      std::printf("%s", DoctorToText(r).c_str());
    }
    return r.ok() ? kExitOk : kExitFailure;
  });
}

VerbRegistrar reg("doctor",
                  "check a model dir and this machine: files, tensors, tokenizer, CPU/GPU, memory",
                  &Run);

}  // namespace
}  // namespace tq::cli
