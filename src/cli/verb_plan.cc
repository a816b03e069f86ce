// turboquant plan -m DIR|ORG/NAME[@REV] [-c N] [--bits B] [--group-size G]
//   [--budget-bpw X] [--kv-bits B | --kv-k-bits B --kv-v-bits B] [--prefill-step N] [--ram-gb X]
//   [--device cpu|cuda] [--json]
// Will it fit? Reads config.json and the safetensors headers only. Exit 0 fits, 1 does not fit
// (or only with a smaller context / prefill step) or files missing, 2 usage error.
#include <cstdio>

#include "cli/cli_kv_flags.h"
#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "convert/budget.h"
#include "convert/defaults.h"
#include "core/error.h"
#include "hub/hub_api.h"
#include "hub/hub_cache.h"
#include "hub/model_ref.h"
#include "hub/remote_checkpoint.h"
#include "model/quant_recipe.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/plan/plan_report.h"

namespace tq::cli {
namespace {

int Run(int argc, char** argv) {
  CLI::App app{
      "Will a model fit? Projects weights, KV cache, prefill workspace and runtime reserve at a "
      "context against this machine's memory (reads config.json and safetensors headers only)",
      argv[0]};
  PlanOptions o;
  QuantRecipeOptions r;
  std::string method = "turboquant", rotation = "hadamard", device = "cpu", kv_dtype = "f16";
  std::string scale_format;
  std::optional<int> bits;
  std::optional<double> budget_bpw;
  std::optional<double> ram_gb;
  bool json = false;
  AddModelFlag(app, &o.model_dir,
               "model directory (config.json + safetensors), or a hub id ORG/NAME[@REV]: from "
               "the local hub cache, else its headers over HTTP (nothing is downloaded)");
  std::string token;
  app.add_option("--token", token,
                 "Hugging Face token for a gated or private hub id (default: $HF_TOKEN)");
  o.context = 0;
  AddCtxFlag(app, &o.context,
             "tokens in the KV cache (default: max_position_embeddings, at most 8192)");
  app.add_option("--bits", bits,
                 "project a TurboQuant conversion at B bits (2, 3, 4, 8); "
                 "default: the weights as stored");
  std::vector<CLI::Option*> recipe_flags = {
      app.add_option("--group-size", r.group_size,
                     "with --bits: group size (32, 64, 128; 16 with e8 scales); default as "
                     "convert's: 128 at 4 and 8 bits, 64 at 2 and 3"),
      app.add_option("--method", method, "with --bits: turboquant or affine")
          ->check(CLI::IsMember({"turboquant", "affine"})),
      app.add_option("--attn-bits", r.attn_bits, "with --bits: attention linears' bits"),
      app.add_option("--mlp-bits", r.mlp_bits, "with --bits: MLP and expert linears' bits"),
      app.add_option("--mlp-group-size", r.mlp_group_size, "with --bits: MLP/expert group size"),
      app.add_flag("--ternary-experts", r.ternary_experts, "with --bits: experts at 1.6 bits"),
      app.add_option("--expert-down-bits", r.expert_down_bits,
                     "with --bits: expert down projections' bits"),
      app.add_option("--protect-layers", r.protect_layers,
                     "with --bits: layers kept at --protect-bits, e.g. 0-1,22-23"),
      app.add_option("--protect-bits", r.protect_bits,
                     "with --bits: bits of protected layers (16 = as stored)"),
      app.add_option("--embed-bits", r.embed_bits,
                     "with --bits: embedding / LM head bits (4, 8 = default, 16 = as stored)"),
      app.add_option("--scale-format", scale_format,
                     "with --bits: group scales f16 | e8 (default, as convert's auto for "
                     "turboquant)")
          ->check(CLI::IsMember({"f16", "e8"})),
      app.add_option("--rotation", rotation, "with --bits: hadamard or none")
          ->check(CLI::IsMember({"hadamard", "none"})),
  };
  CLI::Option* o_budget = app.add_option(
      "--budget-bpw", budget_bpw,
      "project convert --budget-bpw X (implies --bits 4 unless given): the linears at "
      "the allocator's guarantee of at most X bits per weight, an upper bound");
  std::string target_size;
  CLI::Option* o_target = app.add_option(
      "--target-size", target_size,
      "project convert --target-size SIZE (e.g. 13.2MB, 4.5GiB; implies --bits 4): the whole "
      "file at most SIZE, an upper bound");
  o_target->excludes(o_budget);
  // Bits and groups of the linears that the budget chooses itself: giving both is a conflict.
  for (CLI::Option* f : recipe_flags) {
    const std::string n = f->get_name();
    if (n == "--group-size" || n == "--attn-bits" || n == "--mlp-bits" || n == "--mlp-group-size" ||
        n == "--expert-down-bits") {
      o_budget->excludes(f);
      o_target->excludes(f);
    }
  }
  app.add_option("--kv-dtype", kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}))
      ->capture_default_str();
  KvFlags kv_flags;
  AddKvFlags(app, &kv_flags);
  app.add_option("--prefill-step", o.prefill_step, "prompt tokens per forward pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ram-gb", ram_gb, "usable memory in GiB (default: this machine's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", device, "cpu (RAM) or cuda (GPU memory)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  AddThreadsFlag(app, &o.threads);
  app.add_flag("--json", json, "print one JSON object");
  SetExamples(app, {"turboquant plan -m ~/hf/Qwen3-8B --bits 4 -c 32768",
                    "turboquant plan -m ~/hf/Llama-3-8B --budget-bpw 3.5 --kv-bits 4 --json",
                    "turboquant plan -m out/q4 --device cuda"});
  return RunApp(app, argc, argv, [&] {
    if (bits || budget_bpw || !target_size.empty()) {
      if (!target_size.empty()) o.target_bytes = ParseFileSize(target_size);
      r.bits = bits.value_or(r.bits);
      r.method = method == "affine" ? quant::QuantMethod::kAffine : quant::QuantMethod::kCodebook;
      r.rotation = *ParseRotationKind(rotation);
      // convert's defaults (convert/defaults.h), for the options not given.
      auto given = [&](const char* name) {
        for (const CLI::Option* f : recipe_flags)
          if (f->get_name() == name) return f->count() > 0;
        return false;
      };
      ApplyConvertDefaults(r, {.group_size = given("--group-size"),
                               .embed_bits = given("--embed-bits"),
                               .scale_format = !scale_format.empty()});
      if (scale_format == "f16") r.scale_format = quant::ScaleFormat::kF16;
      if (scale_format == "e8") r.scale_format = quant::ScaleFormat::kE8;
      ValidateQuantRecipeOptions(r);
      o.recipe = r;
      o.budget_bpw = budget_bpw.value_or(0);
    } else {
      for (const CLI::Option* f : recipe_flags)
        if (f->count() > 0)
          throw UsageError(f->get_name(), "only applies to a projected conversion (add --bits)");
    }
    o.kv.dtype = *ParseKvDType(kv_dtype);
    ApplyKvFlags(kv_flags, &o.kv);
    o.ram_gb = ram_gb;
    o.device = device == "cuda" ? PlanDevice::kCuda : PlanDevice::kCpu;
    // A hub id not in the local cache is planned over HTTP: config.json, the index and each
    // shard's safetensors header (Range requests), never the weights.
    const hub::ModelRef ref = hub::ResolveModelRef(o.model_dir);
    std::optional<hub::RemoteCheckpoint> remote;
    MemoryPlan plan;
    if (ref.kind == hub::ModelRefKind::kUncachedHub) {
      if (hub::HubOffline())
        Fail("--model " + o.model_dir,
             "not in the local hub cache ({}), and HF_HUB_OFFLINE is set: cannot read its headers "
             "over HTTP",
             ref.why_not_cached);
      hub::HubApi api(hub::FindHubAccess(token));
      remote = hub::ReadRemoteCheckpoint(api, *ref.id);
      o.model_dir = ref.id->ToString();
      plan = MakeMemoryPlan(o, PlanInputs{remote->config, remote->tensors});
    } else {
      o.model_dir = ResolveModelDir(o.model_dir);
      plan = MakeMemoryPlan(o);
    }
    if (json) {
      nlohmann::ordered_json j = PlanToJson(plan);
      if (remote)
        j["hub"] = {{"id", ref.id->repo()},
                    {"revision", ref.id->revision},
                    {"commit", remote->commit},
                    {"bytes_read", remote->bytes_read},
                    {"shards", remote->shard_files.size()},
                    {"download_bytes", remote->download_bytes},
                    {"download_files", remote->download_files},
                    {"download_command", hub::DownloadCommand(*ref.id)}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s", PlanToText(plan).c_str());
      if (remote)
        std::printf(
            "hub          %s at %s, over HTTP: read %s (config, index, %zu shard header(s))\n"
            "download     %s in %d files: %s\n",
            ref.id->repo().c_str(), remote->commit.c_str(), HumanBytes(remote->bytes_read).c_str(),
            remote->shard_files.size(), HumanBytes(remote->download_bytes).c_str(),
            remote->download_files, hub::DownloadCommand(*ref.id).c_str());
    }
    return plan.verdict == PlanVerdict::kFits ? kExitOk : kExitFailure;
  });
}

VerbRegistrar reg("plan",
                  "will it fit? weights, KV cache, workspace and reserve vs this machine's memory",
                  &Run);

}  // namespace
}  // namespace tq::cli
