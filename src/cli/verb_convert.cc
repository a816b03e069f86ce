// turboquant convert -m SRC -o DST --bits {2,3,4} [...]: HF checkpoint -> TurboQuant.
// SIGINT / SIGTERM / SIGHUP stop it between tensors with nothing written (exit 1); a write that
// fails (disk full, file-size limit) also leaves nothing.
#include <atomic>
#include <csignal>
#include <cstdio>

#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "convert/budget.h"
#include "convert/convert.h"
#include "convert/defaults.h"
#include "convert/repack.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/tqmlx_import.h"
#include "runtime/plan/plan_report.h"

namespace tq::cli {
namespace {

std::atomic<bool> g_cancel{false};
extern "C" void OnSignal(int) { g_cancel.store(true); }

// --repack (or a turboquant-mlx source, which can only be repacked: its weights are quantized).
int RunRepack(const ConvertOptions& o, bool asked) {
  if (!asked)
    throw UsageError("--model " + o.model_dir,
                     "is a turboquant-mlx checkpoint (already quantized): use --repack to write "
                     "it as a native TurboQuant checkpoint");
  RepackOptions r;
  r.model_dir = o.model_dir;
  r.out_dir = o.out_dir;
  r.force = o.force;
  r.shard_bytes = o.shard_bytes;
  const RepackSummary s = Repack(r);
  std::fprintf(stderr,
               "wrote %s: %lld tensors (%lld quantized linears, repacked losslessly) in "
               "%lld shard(s), %.2f MB, %.1f s\n",
               r.out_dir.c_str(), (long long)s.tensors, (long long)s.linears,
               (long long)s.num_shards, double(s.bytes) / 1e6, s.seconds);
  return kExitOk;
}

int Run(int argc, char** argv) {
  CLI::App app("Convert a Hugging Face checkpoint to a TurboQuant checkpoint (no calibration data)",
               argv[0]);
  ConvertOptions o;
  QuantRecipeOptions& r = o.recipe;
  std::string method = "turboquant", scale = "mse", rotation = "hadamard";
  int threads = 0;
  int64_t seed = 0;
  AddModelFlag(
      app, &o.model_dir,
      "source model: a directory (Hugging Face, bf16/fp16/fp32) or a hub id ORG/NAME[@REV]");
  ModelFetchFlags fetch;
  AddModelFetchFlags(app, &fetch);
  app.add_option("-o,--out", o.out_dir, "output directory (must not exist unless --force)")
      ->required();
  app.add_option("--bits", r.bits, "bits per weight: 2, 3, 4 (8)")->capture_default_str();
  // The per-linear bits and groups that --budget-bpw chooses itself (CLI11 reports the conflict).
  CLI::Option* o_group = app.add_option(
      "--group-size", r.group_size,
      "weights per group scale: 32, 64, 128 (16 with e8); default 128 at 4 and 8 bits, 64 at 2 "
      "and 3");
  std::vector<CLI::Option*> chosen_by_budget = {o_group};
  app.add_option("--method", method, "turboquant | affine (the baseline)")->capture_default_str();
  chosen_by_budget.push_back(
      app.add_option("--attn-bits", r.attn_bits, "bits of attention linears (default --bits)"));
  chosen_by_budget.push_back(
      app.add_option("--mlp-bits", r.mlp_bits, "bits of MLP and expert linears (default --bits)"));
  chosen_by_budget.push_back(
      app.add_option("--mlp-group-size", r.mlp_group_size, "group size of MLP/expert linears"));
  app.add_flag("--ternary-experts", r.ternary_experts, "expert linears at 1.6 bits (ternary)");
  chosen_by_budget.push_back(
      app.add_option("--expert-down-bits", r.expert_down_bits, "bits of expert down projections"));
  app.add_option("--protect-layers", r.protect_layers,
                 "layers kept at --protect-bits, e.g. 0-1,22-23");
  app.add_option("--protect-bits", r.protect_bits, "bits of protected layers (16 = keep)")
      ->capture_default_str();
  chosen_by_budget.push_back(app.add_option(
      "--tensor-bits", r.tensor_bits,
      "per-tensor bits of decoder linears, e.g. 'down_proj=4,layers.0.=8' (last wins)"));
  app.add_option("--max-rotation-block", r.max_hadamard_block,
                 "largest Hadamard block (a power of two >= 32)")
      ->capture_default_str();
  CLI::Option* o_embed =
      app.add_option("--embed-bits", r.embed_bits,
                     "embedding / LM head: 4, 8 (default) or 16 (= keep); with --target-size the "
                     "allocator chooses them unless this is given");
  app.add_option("--scale", scale, "group scale: rms | mse (MSE-optimal search)")
      ->capture_default_str();
  std::string scale_format = "auto";
  app.add_option(
         "--scale-format", scale_format,
         "how group scales are stored: f16 (2 bytes per group) | e8 (1 byte per group + "
         "256-entry tables shared per rotation group; allows --group-size 16) | auto (e8 for "
         "--method turboquant, f16 for affine)")
      ->capture_default_str();
  CLI::Option* o_budget = app.add_option(
      "--budget-bpw", o.budget_bpw,
      "choose bits and group per linear for this average bits per linear weight (excludes "
      "--group-size, --attn-bits, --mlp-bits, --mlp-group-size, --expert-down-bits, "
      "--tensor-bits: it chooses those itself)");
  for (CLI::Option* c : chosen_by_budget) o_budget->excludes(c);
  std::string target_size;
  CLI::Option* o_target = app.add_option(
      "--target-size", target_size,
      "size the whole file (e.g. 13.2MB, 4.5GiB): choose bits and group per tensor, embedding and "
      "LM head included, from measured sensitivities (noise injection on random tokens, no "
      "data); excludes the same options as --budget-bpw");
  for (CLI::Option* c : chosen_by_budget) o_target->excludes(c);
  o_target->excludes(o_budget);
  std::string sensitivity = "auto";
  app.add_option("--sensitivity", sensitivity,
                 "budget objective: measured (per-tensor noise injection, random tokens) | prior "
                 "(role / depth rules: --budget-sensitive, --budget-edge) | auto (measured with "
                 "--target-size, prior with --budget-bpw)")
      ->capture_default_str();
  app.add_option("--sensitivity-sequences", o.sensitivity.sequences,
                 "random token sequences for measured sensitivities")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--sensitivity-from", o.sensitivity_from,
                 "reuse the sensitivities recorded by an earlier convert of the same model (its "
                 "output directory) instead of measuring them");
  std::string sensitivity_text = "random";
  app.add_option("--sensitivity-text", sensitivity_text,
                 "measured sensitivities on: random (uniform token ids) | self (text the model "
                 "samples itself at temperature 1)")
      ->capture_default_str();
  app.add_option("--sensitivity-tokens", o.sensitivity.tokens, "tokens per sequence")
      ->capture_default_str()
      ->check(CLI::Range(2, 8192));
  std::string objective = "weight";
  app.add_option("--budget-objective", objective,
                 "budget: weigh each tensor's relative error by its size (weight) or not (tensor)")
      ->capture_default_str();
  app.add_option("--budget-sensitive", o.budget_sensitive_weight,
                 "budget: error weight of v_proj / down_proj")
      ->capture_default_str();
  app.add_option("--budget-edge", o.budget_edge_weight,
                 "budget: error weight multiplier of the first and last layer (default: 4 for e8 "
                 "scales at >= 3 bits, else 2)");
  app.add_option("--self-calibrate", o.self_calibrate_tokens,
                 "N > 0: the model samples N tokens of its own text (no external data; "
                 "deterministic for --seed), records each decoder linear's input second moment "
                 "on it, and rounds the codes with error feedback (GPTQ/LDLQ in the rotated "
                 "domain; same file format); 0 = off (nearest rounding). e.g. 8192 (N several "
                 "times the widest linear input)")
      ->capture_default_str();
  app.add_option("--calibration-damp", o.calibration_damp,
                 "with --self-calibrate: dampening λ of the error feedback (H + λ·mean(diag H)·I)")
      ->capture_default_str();
  app.add_flag("--calibration-lazy-scales", o.calibration_lazy_scales,
               "with --self-calibrate: fit each group's scale when the error feedback reaches it "
               "(to the updated weights) instead of before");
  app.add_option("--rotation", rotation, "hadamard | none")->capture_default_str();
  app.add_option("-s,--seed", seed, "seed of the sign vectors")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--streaming", o.streaming, "one source tensor in memory at a time");
  bool repack = false;
  app.add_flag("--repack", repack,
               "rewrite a turboquant-mlx checkpoint as a native one, losslessly (same codes, "
               "scales, codebooks and signs; no quantization options apply)");
  app.add_flag("--force", o.force, "replace an existing --out");
  AddThreadsFlag(app, &threads);
  app.add_option("--shard-bytes", o.shard_bytes, "shard the output above this many bytes")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t(1) << 20, uint64_t(1) << 40));
  SetExamples(app, {
                       "turboquant convert -m models/tq-llama-21m -o out/q4 --bits 4",
                       "turboquant convert -m ~/hf/Qwen3-8B -o out/qwen3-8b-3.5 --budget-bpw 3.5 "
                       "--streaming",
                       "turboquant convert -m ~/hf/Llama-3-8B -o out/l3-q3 --bits 3 "
                       "--protect-layers 0,31 --embed-bits 8",
                       "turboquant convert -m models/tq-llama-21m -o out/q3c --bits 3 "
                       "--self-calibrate 8192",
                   });
  return RunApp(app, argc, argv, [&] {
    o.model_dir = ResolveModelDir(o.model_dir, &fetch);
    if (repack || tqmlx::IsTqMlxDir(o.model_dir)) return RunRepack(o, repack);
    o.seed = uint64_t(seed);
    o.cancel = &g_cancel;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, OnSignal);
    // A file-size limit (ulimit -f) then fails the write (EFBIG) like a full disk, and the temp
    // dir is removed, instead of the default action killing the process mid-file.
    std::signal(SIGXFSZ, SIG_IGN);
    if (method == "turboquant") {
      r.method = quant::QuantMethod::kCodebook;
    } else if (method == "affine") {
      r.method = quant::QuantMethod::kAffine;
    } else {
      throw UsageError("--method " + method, "must be turboquant or affine");
    }
    if (!target_size.empty()) o.target_bytes = ParseFileSize(target_size);
    o.budget_embeddings = o_embed->count() == 0;
    if (sensitivity_text == "random" || sensitivity_text == "self") {
      o.sensitivity.text = sensitivity_text == "self" ? SensitivityOptions::Text::kSelf
                                                      : SensitivityOptions::Text::kRandom;
    } else {
      throw UsageError("--sensitivity-text " + sensitivity_text, "must be random or self");
    }
    if (sensitivity == "measured" || sensitivity == "prior") {
      o.measure_sensitivity = sensitivity == "measured";
    } else if (sensitivity == "auto") {
      o.measure_sensitivity = o.target_bytes > 0;
    } else {
      throw UsageError("--sensitivity " + sensitivity, "must be measured, prior or auto");
    }
    if (!o.sensitivity_from.empty() && sensitivity == "auto") o.measure_sensitivity = true;
    if (o.measure_sensitivity && o.budget_bpw <= 0 && o.target_bytes <= 0)
      throw UsageError("--sensitivity measured", "needs --target-size or --budget-bpw");
    if (scale == "rms") {
      o.scale = quant::ScaleMode::kRms;
    } else if (scale == "mse") {
      o.scale = quant::ScaleMode::kMseSearch;
    } else {
      throw UsageError("--scale " + scale, "must be rms or mse");
    }
    if (scale_format == "f16") {
      r.scale_format = quant::ScaleFormat::kF16;
    } else if (scale_format == "e8") {
      r.scale_format = quant::ScaleFormat::kE8;
    } else if (scale_format != "auto") {
      throw UsageError("--scale-format " + scale_format, "must be f16, e8 or auto");
    }
    ApplyConvertDefaults(r, {.group_size = o_group->count() > 0,
                             .embed_bits = o_embed->count() > 0,
                             .scale_format = scale_format != "auto"});
    const auto rk = ParseRotationKind(rotation);
    if (!rk) throw UsageError("--rotation " + rotation, "must be hadamard or none");
    r.rotation = *rk;
    if (o.budget_bpw < 0 || (o.budget_bpw > 0 && o.budget_bpw < 1.6))
      throw UsageError(fmt::format("--budget-bpw {}", o.budget_bpw), "must be >= 1.6");
    if (o.budget_edge_weight < 0 || o.budget_sensitive_weight <= 0)
      throw UsageError(fmt::format("--budget-edge {} / --budget-sensitive {}", o.budget_edge_weight,
                                   o.budget_sensitive_weight),
                       "must be positive (--budget-edge 0 = the default)");
    if (objective != "weight" && objective != "tensor")
      throw UsageError("--budget-objective " + objective, "must be weight or tensor");
    o.budget_per_weight = objective == "weight";
    if (threads > 0) ThreadPool::SetGlobalThreads(threads);
    const ConvertSummary s = Convert(o);
    std::fprintf(stderr,
                 "wrote %s: %lld tensors (%lld quantized) in %lld shard(s), %s, %.3f bits per "
                 "linear weight, %.1f s, peak RSS %s\n",
                 o.out_dir.c_str(), (long long)s.output_tensors, (long long)s.quantized_tensors,
                 (long long)s.num_shards, HumanBytes(s.output_bytes).c_str(),
                 s.linear_bits_per_weight, s.seconds, HumanBytes(s.peak_rss_bytes).c_str());
    if (o.target_bytes > 0)
      std::fprintf(stderr, "file size %.3f MB (target %.3f MB)\n", double(s.file_bytes) / 1e6,
                   double(o.target_bytes) / 1e6);
    return kExitOk;
  });
}

VerbRegistrar reg("convert", "HF checkpoint -> TurboQuant checkpoint (no calibration data)", &Run);

}  // namespace
}  // namespace tq::cli
