// `turboquant inspect -m DIR [--tensors] [--json]`: what a model directory holds, from
// config.json and the safetensors headers only (no weights are read). A summary by default
// (architecture, parameters, bits per role, file sizes, tokens); --tensors adds every tensor.
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/tqmlx_import.h"
#include "runtime/plan/plan_report.h"

namespace tq::cli {
namespace {

const char* RopeTypeName(RopeScaling::Type t) {
  switch (t) {
    case RopeScaling::Type::kNone:
      return "default";
    case RopeScaling::Type::kLinear:
      return "linear";
    case RopeScaling::Type::kLlama3:
      return "llama3";
    case RopeScaling::Type::kYarn:
      return "yarn";
    case RopeScaling::Type::kDynamic:
      return "dynamic";
    case RopeScaling::Type::kProportional:
      return "proportional";
  }
  return "?";
}

std::string HumanBytes(uint64_t b) { return tq::HumanBytes(int64_t(b)); }

std::string HumanCount(uint64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", double(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", double(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", double(n) / 1e3);
  return std::to_string(n);
}

struct DTypeStats {
  uint64_t count = 0, bytes = 0;
};

// The role of a quantized linear's module prefix, for the "bits per role" summary.
std::string RoleOf(const std::string& prefix) {
  if (prefix.find("embed_tokens") != std::string::npos) return "embedding";
  if (prefix.find("lm_head") != std::string::npos) return "lm_head";
  if (prefix.find("experts") != std::string::npos) return "experts";
  if (prefix.find("attn") != std::string::npos) return "attention";
  if (prefix.find("mlp") != std::string::npos) return "mlp";
  return "other";
}

nlohmann::ordered_json Describe(const std::string& dir, bool with_tensors) {
  const ModelConfig c = LoadModelConfig(dir);
  std::vector<std::string> shards;
  const std::vector<TensorInfo> tensors = Checkpoint::ReadHeaders(dir, &shards);

  using ojson = nlohmann::ordered_json;
  ojson j;
  j["model_dir"] = dir;
  if (tqmlx::IsTqMlxDir(dir)) j["source_format"] = tqmlx::kFormatName;  // repacked at load
  j["architecture"] = c.architecture;
  j["model_type"] = c.model_type;
  j["num_layers"] = c.num_layers;
  j["hidden_size"] = c.hidden_size;
  j["num_heads"] = c.num_heads;
  j["num_kv_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["hidden_act"] = c.hidden_act;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  ojson rope{{"theta", c.rope_theta}, {"type", RopeTypeName(c.rope_scaling.type)}};
  if (c.rope_scaling.type != RopeScaling::Type::kNone) {
    rope["factor"] = c.rope_scaling.factor;
    rope["original_max_position_embeddings"] = c.rope_scaling.original_max_position_embeddings;
  }
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3) {
    rope["low_freq_factor"] = c.rope_scaling.low_freq_factor;
    rope["high_freq_factor"] = c.rope_scaling.high_freq_factor;
  }
  if (c.rope_scaling.type == RopeScaling::Type::kYarn) {
    rope["beta_fast"] = c.rope_scaling.beta_fast;
    rope["beta_slow"] = c.rope_scaling.beta_slow;
  }
  j["rope"] = rope;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["qk_norm"] = c.qk_norm;
  j["sliding_window"] = c.sliding_window;
  if (c.sliding_window > 0) {
    int64_t n = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) n += c.LayerIsSliding(l);
    j["sliding_layers"] = n;
  }
  if (c.is_moe()) {
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.LayerIsMoe(l);
    j["moe"] = ojson{{"num_experts", c.num_experts},
                     {"num_experts_per_tok", c.num_experts_per_tok},
                     {"moe_intermediate_size", c.moe_intermediate_size},
                     {"norm_topk_prob", c.norm_topk_prob},
                     {"moe_layers", moe_layers}};
  } else {
    j["moe"] = nullptr;
  }
  j["bos_token_ids"] = c.bos_token_ids;
  j["eos_token_ids"] = c.eos_token_ids;
  j["torch_dtype"] = c.torch_dtype;

  const auto raw = ojson::parse(c.raw_json);
  const ojson* qmap = raw.contains("quantization") && raw["quantization"].is_object() &&
                              raw["quantization"].contains("tensors") &&
                              raw["quantization"]["tensors"].is_object()
                          ? &raw["quantization"]["tensors"]
                          : nullptr;
  std::map<std::string, DTypeStats> by_dtype;
  uint64_t bytes = 0, params = 0, stored_elements = 0;
  for (const auto& t : tensors) {
    auto& s = by_dtype[std::string(DTypeName(t.dtype))];
    ++s.count;
    s.bytes += t.nbytes;
    bytes += t.nbytes;
    stored_elements += uint64_t(NumElements(t.shape));
    // Parameters: a quantized linear's [out, in] (from the map), everything else as stored.
    bool part_of_quantized = false;
    for (const char* suffix : {".codes", ".scales", ".codebook", ".mins", ".signs", ".scale_table"})
      part_of_quantized |= qmap && t.name.ends_with(suffix);
    if (!part_of_quantized) params += uint64_t(NumElements(t.shape));
  }
  // Bits per role: "attention": {"q4 g64 e8": 24}, from the quantization map.
  ojson roles = ojson::object();
  if (qmap) {
    for (const auto& [prefix, e] : qmap->items()) {
      if (!e.is_object()) continue;
      if (e.contains("shape") && e["shape"].is_array() && e["shape"].size() == 2 &&
          e["shape"][0].is_number_unsigned() && e["shape"][1].is_number_unsigned())
        params += e["shape"][0].get<uint64_t>() * e["shape"][1].get<uint64_t>();
      const std::string what = fmt::format(
          "{} g{}{}", e.value("format", std::string("?")), e.value("group_size", int64_t(0)),
          e.value("scales", std::string("f16")) == "e8" ? " e8" : "");
      const std::string role = RoleOf(prefix);
      ojson& counts = roles[role];
      if (!counts.is_object()) counts = ojson::object();
      counts[what] = counts.value(what, 0) + 1;
    }
  }
  uint64_t file_bytes = 0;
  for (const auto& f : shards) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(f, ec);
    if (!ec) file_bytes += n;
  }
  ojson dt = ojson::object();
  for (const auto& [name, s] : by_dtype) dt[name] = {{"count", s.count}, {"bytes", s.bytes}};
  j["parameters"] = params;
  j["tensors"] =
      ojson{{"count", tensors.size()}, {"bytes", bytes},           {"elements", stored_elements},
            {"shards", shards.size()}, {"file_bytes", file_bytes}, {"by_dtype", dt}};
  if (qmap) j["quantized_by_role"] = roles;
  if (with_tensors) {
    ojson list = ojson::array();
    for (const auto& t : tensors)
      list.push_back({{"name", t.name},
                      {"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"bytes", t.nbytes}});
    j["tensor_list"] = list;
  }
  if (raw.contains("quantization")) {
    j["quantization"] = raw["quantization"];
    // Group-scale storage per quantized tensor (format 2: "scales": "f16" | "e8"; format 1: f16)
    // and the number of distinct e8 scale tables.
    const auto& q = raw["quantization"];
    if (q.is_object() && q.contains("tensors") && q["tensors"].is_object()) {
      std::map<std::string, int> formats;
      std::set<std::string> tables;
      for (const auto& [name, t] : q["tensors"].items()) {
        if (!t.is_object()) continue;
        ++formats[t.contains("scales") && t["scales"].is_string() ? t["scales"].get<std::string>()
                                                                  : "f16"];
        if (t.contains("scale_table") && t["scale_table"].is_string())
          tables.insert(t["scale_table"].get<std::string>());
      }
      j["group_scales"] = ojson{{"tensors", formats}, {"e8_tables", tables.size()}};
    }
  }
  return j;
}

void PrintHuman(const nlohmann::ordered_json& j) {
  const auto row = [](const char* k, const std::string& v) {
    std::printf("%-16s %s\n", k, v.c_str());
  };
  const auto yn = [](const nlohmann::ordered_json& b) { return b.get<bool>() ? "yes" : "no"; };
  row("model", j["model_dir"].get<std::string>());
  if (j.contains("source_format"))
    row("format", fmt::format("{} checkpoint (repacked into turboquant's format at load; "
                              "`convert --repack` writes it)",
                              j["source_format"].get<std::string>()));
  row("architecture", fmt::format("{} (model_type {})", j["architecture"].get<std::string>(),
                                  j["model_type"].get<std::string>()));
  row("layers", j["num_layers"].dump());
  row("hidden", j["hidden_size"].dump());
  row("heads", fmt::format("{} q / {} kv, head_dim {}", j["num_heads"].dump(),
                           j["num_kv_heads"].dump(), j["head_dim"].dump()));
  row("FFN",
      fmt::format("{} ({})", j["intermediate_size"].dump(), j["hidden_act"].get<std::string>()));
  if (!j["moe"].is_null()) {
    const auto& m = j["moe"];
    row("experts", fmt::format("{} x {}, top-{}{}, MoE in {} of {} layers", m["num_experts"].dump(),
                               m["moe_intermediate_size"].dump(), m["num_experts_per_tok"].dump(),
                               m["norm_topk_prob"].get<bool>() ? " (normalized)" : "",
                               m["moe_layers"].dump(), j["num_layers"].dump()));
  }
  row("vocab", j["vocab_size"].dump());
  row("max positions", j["max_position_embeddings"].dump());
  const auto& r = j["rope"];
  std::string rope =
      fmt::format("theta {}, {}", r["theta"].get<double>(), r["type"].get<std::string>());
  if (r.contains("factor")) {
    rope += fmt::format(" factor {}", r["factor"].get<double>());
    const auto& orig = r["original_max_position_embeddings"];
    if (orig.is_number() && orig.get<double>() > 0)  // proportional (gemma4) has none
      rope += fmt::format(" (original {} positions)", orig.dump());
  }
  row("rope", rope);
  row("rms_norm_eps", fmt::format("{}", j["rms_norm_eps"].get<double>()));
  row("attention", fmt::format("bias {}, qk-norm {}, sliding window {}", yn(j["attention_bias"]),
                               yn(j["qk_norm"]),
                               j["sliding_window"].get<int64_t>() > 0
                                   ? fmt::format("{} ({} layers)", j["sliding_window"].dump(),
                                                 j["sliding_layers"].dump())
                                   : "none"));
  row("mlp bias", yn(j["mlp_bias"]));
  row("tie embeddings", yn(j["tie_word_embeddings"]));
  row("bos / eos", fmt::format("{} / {}", j["bos_token_ids"].dump(), j["eos_token_ids"].dump()));
  row("torch_dtype", j["torch_dtype"].get<std::string>());
  const auto& t = j["tensors"];
  row("parameters", HumanCount(j["parameters"].get<uint64_t>()));
  row("tensors", fmt::format("{} in {} shard(s), {} of tensors, {} on disk", t["count"].dump(),
                             t["shards"].dump(), HumanBytes(t["bytes"].get<uint64_t>()),
                             HumanBytes(t["file_bytes"].get<uint64_t>())));
  for (const auto& [name, s] : t["by_dtype"].items())
    row(("  " + name).c_str(),
        fmt::format("{} tensors, {}", s["count"].dump(), HumanBytes(s["bytes"].get<uint64_t>())));
  if (j.contains("group_scales")) {
    std::string v;
    for (const auto& [name, n] : j["group_scales"]["tensors"].items())
      v += fmt::format("{}{} {}", v.empty() ? "" : ", ", n.dump(), name);
    if (j["group_scales"]["e8_tables"].get<int64_t>() > 0)
      v += fmt::format(" (e8: 1 byte per group, {} shared 256-entry tables)",
                       j["group_scales"]["e8_tables"].dump());
    row("group scales", v);
  }
  if (j.contains("quantization")) {
    const auto& q = j["quantization"];
    std::string v = "turboquant";
    if (q.is_object()) {
      v = fmt::format("{} format {}, method {}, {} scales", q.value("mode", std::string("?")),
                      q.contains("format_version") ? q["format_version"].dump() : "?",
                      q.value("method", std::string("?")),
                      q.value("scale_format", std::string("f16")));
      if (q.contains("linear_bits_per_weight") && q["linear_bits_per_weight"].is_number())
        v += fmt::format(", {:.3f} bits per linear weight",
                         q["linear_bits_per_weight"].get<double>());
      if (q.contains("budget_bpw") && q["budget_bpw"].is_number())
        v += fmt::format(" (--budget-bpw {})", q["budget_bpw"].get<double>());
      if (q.contains("target_size_bytes") && q["target_size_bytes"].is_number())
        v += fmt::format(" (--target-size {:.2f} MB{})",
                         double(q["target_size_bytes"].get<int64_t>()) / 1e6,
                         q.contains("sensitivity") ? ", measured sensitivities" : "");
    }
    row("quantization", v);
  }
  if (j.contains("quantized_by_role")) {
    for (const auto& [role, counts] : j["quantized_by_role"].items()) {
      std::string v;
      for (const auto& [what, n] : counts.items())
        v += fmt::format("{}{} x {}", v.empty() ? "" : ", ", n.dump(), what);
      row(("  " + role).c_str(), v);
    }
  }
  // With --tensors: what each quantized tensor got (a budget's choices) and its sensitivity.
  if (j.contains("tensor_list") && j.contains("quantization") && j["quantization"].is_object() &&
      j["quantization"].contains("tensors") && j["quantization"]["tensors"].is_object()) {
    std::printf("\n%-48s %-6s %-6s %-6s %s\n", "quantized tensor", "format", "group", "scales",
                "sensitivity");
    for (const auto& [name, t] : j["quantization"]["tensors"].items()) {
      if (!t.is_object()) continue;
      const std::string sens = t.contains("sensitivity") && t["sensitivity"].is_number()
                                   ? fmt::format("{:.4g}", t["sensitivity"].get<double>())
                                   : "-";
      std::printf("%-48s %-6s %-6s %-6s %s\n", name.c_str(),
                  t.value("format", std::string("?")).c_str(),
                  fmt::format("g{}", t.value("group_size", int64_t(0))).c_str(),
                  t.value("scales", std::string("f16")).c_str(), sens.c_str());
    }
  }
  if (j.contains("tensor_list")) {
    std::printf("\n%-56s %-5s %-18s %s\n", "tensor", "dtype", "shape", "bytes");
    for (const auto& t : j["tensor_list"]) {
      std::string shape = "[";
      for (size_t i = 0; i < t["shape"].size(); ++i)
        shape += (i ? ", " : "") + t["shape"][i].dump();
      std::printf("%-56s %-5s %-18s %s\n", t["name"].get<std::string>().c_str(),
                  t["dtype"].get<std::string>().c_str(), (shape + "]").c_str(),
                  HumanBytes(t["bytes"].get<uint64_t>()).c_str());
    }
  }
}

int Run(int argc, char** argv) {
  CLI::App app{
      "Show a model directory's architecture, sizes, dtypes, tensor count and bytes "
      "(reads config.json and the safetensors headers only)",
      argv[0]};
  std::string dir;
  bool as_json = false, with_tensors = false;
  AddModelFlag(app, &dir, "model directory (config.json + safetensors)");
  app.add_flag("--tensors", with_tensors, "also list every tensor (name, dtype, shape, bytes)");
  app.add_flag("--json", as_json, "print one JSON object");
  SetExamples(
      app, {"turboquant inspect -m models/tq-llama-21m", "turboquant inspect -m out/q4 --tensors",
            "turboquant inspect -m out/q4 --json | jq .quantized_by_role"});
  return RunApp(app, argc, argv, [&] {
    dir = ResolveModelDir(dir);
    const auto j = Describe(dir, with_tensors);
    if (as_json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintHuman(j);
    }
    return kExitOk;
  });
}

VerbRegistrar reg("inspect", "show a model's architecture, sizes, dtypes, tensor count, bytes",
                  &Run);

}  // namespace
}  // namespace tq::cli
