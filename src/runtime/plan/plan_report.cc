#include "runtime/plan/plan_report.h"

#include <fmt/format.h>

#include <cstdlib>

namespace tq {

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const bool neg = bytes < 0;
  double v = std::abs(double(bytes));
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  const std::string s =
      u == 0 ? fmt::format("{} B", int64_t(v)) : fmt::format("{:.1f} {}", v, units[u]);
  return neg ? "-" + s : s;
}

std::string VerdictLine(const MemoryPlan& p) {
  std::string s;
  switch (p.verdict) {
    case PlanVerdict::kFits:
      s = fmt::format("fits ({} headroom)", HumanBytes(p.headroom_bytes));
      break;
    case PlanVerdict::kFitsSmaller: {
      s = "fits only with a smaller context or prefill step:";
      if (p.max_context > 0)
        s += fmt::format(" --context {} (at --prefill-step {})", p.max_context, p.prefill_step);
      if (p.max_context > 0 && p.max_prefill_step > 0) s += " or";
      if (p.max_prefill_step > 0)
        s += fmt::format(" --prefill-step {} (at --context {})", p.max_prefill_step, p.context);
      break;
    }
    case PlanVerdict::kDoesNotFit:
      s = fmt::format("does not fit: needs {}, {} usable", HumanBytes(p.memory.peak()),
                      HumanBytes(p.usable_bytes));
      break;
  }
  if (p.moe && p.verdict != PlanVerdict::kFits) {
    s += fmt::format(
        "; with expert streaming (--expert-cache {}MiB): peak {}, {}: {:.0f}% of experts "
        "resident; each token reads ~{:.1f} MB from disk on misses (uniform routing)",
        p.streaming_cache_bytes >> 20, HumanBytes(p.streaming_peak_bytes),
        p.streaming_fits ? "fits" : "does not fit either", 100 * p.streaming_resident_fraction,
        double(p.streaming_miss_bytes_per_token) / 1e6);
  }
  return s;
}

std::string PlanToText(const MemoryPlan& p) {
  const ModelConfig& c = p.config;
  std::string out;
  auto row = [&](const char* key, const std::string& value) {
    out += fmt::format("{:<11} {}\n", key, value);
  };
  auto amount = [&](const char* key, int64_t bytes, const std::string& detail) {
    row(key, fmt::format("{:>10}  {}", HumanBytes(bytes), detail));
  };
  row("model",
      fmt::format("{} ({}, {} layers{}, {})", p.model_dir, c.model_type, c.num_layers,
                  c.is_moe() ? fmt::format(", {} experts", c.num_experts) : "",
                  p.source_format.empty() ? p.checkpoint_kind + " checkpoint"
                                          : p.source_format + " checkpoint, repacked at load"));
  std::string w = p.weights_source;
  if (p.lookup_table_bytes > 0)
    w += fmt::format("; embedding {} mapped, resident by row", HumanBytes(p.lookup_table_bytes));
  if (p.expert_bytes > 0) w += fmt::format("; experts {}", HumanBytes(p.expert_bytes));
  if (p.derived_bytes > 0)
    w += fmt::format("; MLA's absorbed kv_b {} (fp32, built at load)", HumanBytes(p.derived_bytes));
  amount("weights", p.memory.weights, w);
  std::string kv;
  if (p.kv_sliding_layers == 0) {
    kv = fmt::format("{} tokens x {}/token, {} layers", p.context, HumanBytes(p.kv_bytes_per_token),
                     p.kv_layers);
  } else {
    kv = fmt::format("{} tokens:", p.context);
    if (p.kv_full_layers > 0)
      kv += fmt::format(" {} full-attention layers {};", p.kv_full_layers,
                        HumanBytes(p.kv_full_bytes));
    kv += fmt::format(" {} sliding-window layers (window {}) keep {} positions each, {}",
                      p.kv_sliding_layers, p.sliding_window, p.kv_sliding_positions,
                      HumanBytes(p.kv_sliding_bytes));
  }
  if (p.recurrent_layers > 0)
    kv += fmt::format("; {} recurrent layers' state {}", p.recurrent_layers,
                      HumanBytes(p.recurrent_state_bytes));
  amount("KV cache", p.memory.kv, kv);
  std::string ws = fmt::format("prefill step {} (fp32 activations, logits)", p.effective_step);
  if (p.memory.load_transient > p.memory.workspace)
    ws += fmt::format("; the peak counts the tokenizer's load heap ({}) instead: it is larger",
                      HumanBytes(p.memory.load_transient));
  amount("workspace", p.memory.workspace, ws);
  amount("reserve", p.memory.reserve,
         fmt::format(
             "runtime {}, tokenizer {} (+{} while loading), {} threads {}{}",
             HumanBytes(p.reserve_base), HumanBytes(p.reserve_tokenizer),
             HumanBytes(p.tokenizer_load_transient), p.threads, HumanBytes(p.reserve_threads),
             p.reserve_device > 0
                 ? fmt::format(", CUDA context and GEMM scratch {}", HumanBytes(p.reserve_device))
                 : ""));
  amount("peak", p.memory.peak(), "");
  amount("usable", p.usable_bytes, p.usable_source);
  amount("headroom", p.headroom_bytes, "");
  row("verdict", VerdictLine(p));
  for (const auto& n : p.recipe_notes) row("recipe", n);
  for (const auto& n : p.notes) row("note", n);
  return out;
}

nlohmann::ordered_json PlanToJson(const MemoryPlan& p) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["model_dir"] = p.model_dir;
  j["model_type"] = p.config.model_type;
  j["checkpoint_kind"] = p.checkpoint_kind;
  if (!p.source_format.empty()) j["source_format"] = p.source_format;
  j["weights_source"] = p.weights_source;
  j["device"] = p.device;
  j["context"] = p.context;
  j["prefill_step"] = p.prefill_step;
  j["effective_prefill_step"] = p.effective_step;
  j["weights_bytes"] = p.memory.weights;
  j["file_bytes"] = p.file_bytes;
  j["unused_bytes"] = p.unused_bytes;
  j["lookup_table_bytes"] = p.lookup_table_bytes;
  j["expert_bytes"] = p.expert_bytes;
  j["derived_bytes"] = p.derived_bytes;
  j["target_size_bytes"] = p.target_bytes > 0 ? ojson(p.target_bytes) : ojson(nullptr);
  if (p.budget_bpw > 0) {
    j["budget"] = ojson{{"bpw", p.budget_bpw},
                        {"upper_bound", true},
                        {"linear_bytes_bound", p.budget_linear_bytes_bound},
                        {"linear_bytes_recipe", p.budget_linear_bytes_before}};
  } else {
    j["budget"] = nullptr;
  }
  j["kv_bytes"] = p.memory.kv;
  j["kv_bytes_per_token"] = p.kv_bytes_per_token;
  j["kv_layers"] = p.kv_layers;
  j["kv_full_layers"] = p.kv_full_layers;
  j["kv_sliding_layers"] = p.kv_sliding_layers;
  j["sliding_window"] = p.sliding_window;
  j["kv_sliding_positions"] = p.kv_sliding_positions;
  j["kv_full_bytes"] = p.kv_full_bytes;
  j["kv_sliding_bytes"] = p.kv_sliding_bytes;
  j["recurrent_layers"] = p.recurrent_layers;
  j["recurrent_state_bytes"] = p.recurrent_state_bytes;
  j["workspace_bytes"] = p.memory.workspace;
  j["reserve_bytes"] = p.memory.reserve;
  j["reserve"] = ojson{{"runtime", p.reserve_base},
                       {"tokenizer", p.reserve_tokenizer},
                       {"tokenizer_load_transient", p.tokenizer_load_transient},
                       {"threads", p.reserve_threads},
                       {"thread_count", p.threads},
                       {"device", p.reserve_device}};
  j["peak_bytes"] = p.memory.peak();
  j["usable_bytes"] = p.usable_bytes;
  j["usable_source"] = p.usable_source;
  j["headroom_bytes"] = p.headroom_bytes;
  j["verdict"] = PlanVerdictName(p.verdict);
  j["verdict_text"] = VerdictLine(p);
  j["max_context"] = p.max_context > 0 ? ojson(p.max_context) : ojson(nullptr);
  j["max_prefill_step"] = p.max_prefill_step > 0 ? ojson(p.max_prefill_step) : ojson(nullptr);
  if (p.moe) {
    j["expert_streaming"] = ojson{
        {"cache_bytes", p.streaming_cache_bytes},
        {"recommended_flag", fmt::format("--expert-cache {}MiB", p.streaming_cache_bytes >> 20)},
        {"min_cache_bytes", p.streaming_min_cache_bytes},
        {"expert_bytes", p.streaming_expert_bytes},
        {"resident_fraction", p.streaming_resident_fraction},
        {"miss_bytes_per_token", p.streaming_miss_bytes_per_token},
        {"peak_bytes", p.streaming_peak_bytes},
        {"fits", p.streaming_fits}};
  } else {
    j["expert_streaming"] = nullptr;
  }
  j["recipe_notes"] = p.recipe_notes;
  j["notes"] = p.notes;
  return j;
}

}  // namespace tq
