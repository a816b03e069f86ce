// Helpers shared by the config.json parsers (internal to io/): range-checked sizes and the
// per-family sections (MLA, Gated DeltaNet, Mamba-2, layer patterns) of model_config_families.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/json_fields.h"
#include "io/model_config.h"

namespace tq::config_parse {

constexpr int64_t kMaxSize = INT32_MAX;  // keeps products of two sizes inside int64

int64_t CheckRange(const JsonFields& f, const std::string& key, int64_t v, int64_t lo,
                   int64_t hi = kMaxSize);
// A size >= 1; absent -> dflt, or an error "required but missing" when there is none.
int64_t SizeField(const JsonFields& f, const std::string& key, std::optional<int64_t> dflt = {});
// A size >= 0 where null / absent means 0 (q_lora_rank of DeepSeek-V2-Lite).
int64_t OptionalSize(const JsonFields& f, const std::string& key);
double PositiveDouble(const JsonFields& f, const std::string& key, double dflt);

void ParseMla(const JsonFields& f, ModelConfig& c);
void ParseDeltaNet(const JsonFields& f, ModelConfig& c);
void ParseMamba2(const JsonFields& f, ModelConfig& c);
// nemotron_h: layers_block_type or hybrid_override_pattern -> c.layer_types ("mamba",
// "full_attention", "mlp", "moe").
void ParseNemotronPattern(const JsonFields& f, ModelConfig& c);
// gemma4_text: per_layer_config head_dim overrides and per-layer-input sizes.
void ParseGemma4(const JsonFields& f, ModelConfig& c);

}  // namespace tq::config_parse
