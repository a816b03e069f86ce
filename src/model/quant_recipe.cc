#include "model/quant_recipe.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "core/error.h"
#include "io/model_config.h"
#include "quant/packing.h"

namespace tq {
namespace {

bool OneOf(int v, std::initializer_list<int> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> ParseIndex(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// The key of the sign vector a linear shares with the others reading the same input.
std::string RotationGroupKey(TensorRole role, int64_t layer) {
  const std::string l = "model.layers." + std::to_string(layer);
  switch (role) {
    case TensorRole::kAttnQ:
    case TensorRole::kAttnK:
    case TensorRole::kAttnV:
    case TensorRole::kAttnQkv:  // phi3: one fused projection of the same input
    case TensorRole::kMlaQA:    // deepseek: q_a and kv_a read the layer's normed input too
    case TensorRole::kMlaKvA:
      return l + "/attn_in";
    case TensorRole::kMlaQB:
      return l + "/mla_q_b";
    case TensorRole::kMlaKvB:
      return l + "/mla_kv_b";
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
      return l + "/shared_in";
    case TensorRole::kSharedDown:
      return l + "/shared_down";
    case TensorRole::kLinearAttnIn:
      return l + "/linear_attn_in";
    case TensorRole::kLinearAttnOut:
      return l + "/linear_attn_out";
    case TensorRole::kSsmIn:
      return l + "/ssm_in";
    case TensorRole::kSsmOut:
      return l + "/ssm_out";
    case TensorRole::kAttnO:
      return l + "/attn_o";
    case TensorRole::kMlpGate:
    case TensorRole::kMlpUp:
    case TensorRole::kMlpGateUp:
      return l + "/mlp_in";
    case TensorRole::kMlpDown:
      return l + "/mlp_down";
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
      return l + "/experts_in";
    case TensorRole::kExpertDown:
      return l + "/experts_down";
    case TensorRole::kLmHead:
      return "lm_head";
    default:
      return "";
  }
}

bool IsAttention(TensorRole r) {
  return r == TensorRole::kAttnQ || r == TensorRole::kAttnK || r == TensorRole::kAttnV ||
         r == TensorRole::kAttnO;
}

// Bits per code for a decoder linear (16 = keep; 0 never returned). Ternary is returned as 1.
int LinearBits(const QuantRecipeOptions& o, TensorRole role, bool protected_layer) {
  if (protected_layer) return o.protect_bits;
  auto or_bits = [&](int b) { return b > 0 ? b : o.bits; };
  if (IsAttention(role)) return or_bits(o.attn_bits);
  if (role == TensorRole::kExpertDown && o.expert_down_bits > 0) return o.expert_down_bits;
  if (IsExpert(role) && o.ternary_experts) return 1;
  return or_bits(o.mlp_bits);
}

}  // namespace

std::string_view RotationKindName(RotationKind r) {
  return r == RotationKind::kHadamard ? "hadamard" : "none";
}

std::optional<RotationKind> ParseRotationKind(std::string_view s) {
  if (s == "hadamard") return RotationKind::kHadamard;
  if (s == "none") return RotationKind::kNone;
  return std::nullopt;
}

void ValidateQuantRecipeOptions(const QuantRecipeOptions& o) {
  auto check = [](bool ok, std::string_view flag, int v, std::string_view allowed) {
    if (!ok) throw UsageError(fmt::format("{} {}", flag, v), fmt::format("must be {}", allowed));
  };
  check(OneOf(o.bits, {2, 3, 4, 8}), "--bits", o.bits, "2, 3, 4 or 8");
  const bool e8 = o.scale_format == quant::ScaleFormat::kE8;
  if (e8 && o.method != quant::QuantMethod::kCodebook)
    throw UsageError("--scale-format e8", "needs --method turboquant (affine keeps fp16 scales)");
  if (!e8 && (o.group_size == 16 || o.mlp_group_size == 16))
    throw UsageError("--group-size 16", "needs --scale-format e8 (16 fp16 bits per 16 weights)");
  check(OneOf(o.group_size, {16, 32, 64, 128}), "--group-size", o.group_size,
        "16 (with e8 scales), 32, 64 or 128");
  check(OneOf(o.attn_bits, {0, 2, 3, 4, 8}), "--attn-bits", o.attn_bits, "2, 3, 4 or 8");
  check(OneOf(o.mlp_bits, {0, 2, 3, 4, 8}), "--mlp-bits", o.mlp_bits, "2, 3, 4 or 8");
  check(OneOf(o.mlp_group_size, {0, 16, 32, 64, 128}), "--mlp-group-size", o.mlp_group_size,
        "16 (with e8 scales), 32, 64 or 128");
  check(OneOf(o.expert_down_bits, {0, 2, 3, 4, 8}), "--expert-down-bits", o.expert_down_bits,
        "2, 3, 4 or 8");
  check(OneOf(o.protect_bits, {2, 3, 4, 8, 16}), "--protect-bits", o.protect_bits,
        "2, 3, 4, 8 or 16 (16 = keep as stored)");
  if (o.embed_bits == 6)
    throw UsageError("--embed-bits 6",
                     "there is no 6-bit code format (quant/format.h has q2, q3, q4, q8); use 4, 8 "
                     "or 16");
  check(OneOf(o.embed_bits, {4, 8, 16}), "--embed-bits", o.embed_bits,
        "4, 8 or 16 (16 = keep as stored)");
  if (o.ternary_experts && o.method == quant::QuantMethod::kAffine)
    throw UsageError("--ternary-experts", "needs --method turboquant (affine has no ternary)");
  ParseTensorBits(o.tensor_bits);
  if (o.max_hadamard_block < 32)
    throw UsageError(fmt::format("--max-rotation-block {}", o.max_hadamard_block), "must be >= 32");
}

std::vector<std::pair<std::string, int>> ParseTensorBits(std::string_view spec) {
  std::vector<std::pair<std::string, int>> out;
  if (Trim(spec).empty()) return out;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view part = Trim(spec.substr(start, comma - start));
    const size_t eq = part.rfind('=');
    const std::string where = fmt::format("--tensor-bits '{}'", part);
    if (part.empty() || eq == std::string_view::npos || eq == 0)
      throw UsageError(where, "expected NAME_PART=BITS, e.g. 'down_proj=4'");
    const std::optional<int64_t> bits = ParseIndex(part.substr(eq + 1));
    if (!bits || !OneOf(int(*bits), {2, 3, 4, 8, 16}))
      throw UsageError(where, "bits must be 2, 3, 4, 8 or 16 (16 = keep as stored)");
    out.emplace_back(std::string(Trim(part.substr(0, eq))), int(*bits));
    start = comma + 1;
  }
  return out;
}

std::vector<int64_t> ParseLayerRanges(std::string_view spec, int64_t num_layers,
                                      std::string_view flag) {
  std::set<int64_t> layers;
  const std::string where = fmt::format("{} '{}'", flag, spec);
  if (Trim(spec).empty()) return {};
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view part = Trim(spec.substr(start, comma - start));
    if (part.empty()) throw UsageError(where, "empty item (expected e.g. '0-1,22-23')");
    const size_t dash = part.find('-');
    const auto first = ParseIndex(part.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : ParseIndex(part.substr(dash + 1));
    if (!first || !last)
      throw UsageError(where, fmt::format("'{}' is not a layer or a range A-B of layers", part));
    if (*first > *last) throw UsageError(where, fmt::format("range '{}' is reversed", part));
    if (*last >= num_layers)
      throw UsageError(where, fmt::format("layer {} out of range: the model has layers 0-{}", *last,
                                          num_layers - 1));
    for (int64_t l = *first; l <= *last; ++l) layers.insert(l);
    start = comma + 1;
  }
  return {layers.begin(), layers.end()};
}

GroupChoice ChooseGroup(int64_t in, int group_size, RotationKind rotation, int64_t max_block) {
  GroupChoice c;
  if (in <= 0 || group_size <= 0) return c;
  if (rotation == RotationKind::kHadamard) {
    const int64_t b = quant::HadamardBlockSize(in, max_block);
    if (b >= group_size) {
      c = {true, group_size, b, ""};
      return c;
    }
    if (b >= 32) {
      c = {true, int(b), b,
           fmt::format("in={}: Hadamard block {} < group {}: group {}", in, b, group_size, b)};
      return c;
    }
  }
  for (int g = group_size; g >= std::min(group_size, 32); g /= 2) {
    if (in % g == 0) {
      c.quantizable = true;
      c.group_size = g;
      if (rotation == RotationKind::kHadamard)
        c.note = fmt::format("in={}: no power-of-two block >= 32 divides it: no rotation", in);
      if (g != group_size)
        c.note +=
            fmt::format("{}in={}: group {} -> {}", c.note.empty() ? "" : "; ", in, group_size, g);
      return c;
    }
  }
  c.note = fmt::format("in={}: not a multiple of 32: kept as stored", in);
  return c;
}

int64_t QuantizedTensorBytes(int64_t rows, int64_t cols, quant::CodeFormat format, int group_size,
                             quant::QuantMethod method, quant::ScaleFormat scale_format) {
  const int64_t codes = rows * int64_t(quant::PackedBytes(format, cols));
  const int64_t groups = rows * (cols / group_size);
  const bool affine = method == quant::QuantMethod::kAffine;
  const bool e8 = !affine && scale_format == quant::ScaleFormat::kE8;
  // fp16 scale (+ fp16 minimum), or an e8 code per group (its table is counted by the caller)
  const int64_t scales = e8 ? groups : groups * 2 * (affine ? 2 : 1);
  const int64_t codebook = affine ? 0 : int64_t(quant::Traits(format).levels) * 4;  // fp32
  return codes + scales + codebook;
}

double LinearStoredBits(int64_t rows, int64_t cols, quant::CodeFormat format, int group_size,
                        quant::QuantMethod method, quant::ScaleFormat scale_format) {
  const int64_t codebook =
      method == quant::QuantMethod::kAffine ? 0 : int64_t(quant::Traits(format).levels) * 4;
  return 8.0 * double(QuantizedTensorBytes(rows, cols, format, group_size, method, scale_format) -
                      codebook);
}

int64_t SignBytes(int64_t n) { return (n + 7) / 8; }

void AssignScaleTable(TensorDecision& d) {
  d.scale_table.clear();
  if (!d.quantize || d.scale_format != quant::ScaleFormat::kE8) return;
  std::string base = d.rotation_group.empty() ? d.name : d.rotation_group;
  if (base.ends_with(".weight")) base.resize(base.size() - 7);
  for (char& ch : base)
    if (ch == '/') ch = '.';  // "model.layers.3/attn_in" -> "model.layers.3.attn_in"
  d.scale_table = base + ".scale_table";
}

double ScaleTableBits(const std::vector<TensorDecision>& decisions) {
  std::set<std::string> tables;
  for (const TensorDecision& d : decisions)
    if (d.quantize && IsDecoderLinear(d.role) && !d.scale_table.empty())
      tables.insert(d.scale_table);
  return 8.0 * double(kE8TableBytes) * double(tables.size());
}

QuantRecipe PlanQuantization(const ModelConfig& config, const std::vector<TensorInfo>& tensors,
                             const QuantRecipeOptions& opts) {
  ValidateQuantRecipeOptions(opts);
  QuantRecipe r;
  r.options = opts;
  r.protected_layers = ParseLayerRanges(opts.protect_layers, config.num_layers);
  const std::set<int64_t> protect(r.protected_layers.begin(), r.protected_layers.end());
  const TensorRoleMap roles = TensorRoleMap::Of(config, tensors);
  const std::vector<std::pair<std::string, int>> tensor_bits = ParseTensorBits(opts.tensor_bits);
  std::set<std::string> signs_counted, tables_counted, notes;

  for (const TensorInfo& t : tensors) {
    TensorDecision d;
    d.name = t.name;
    d.dtype = t.dtype;
    d.shape = t.shape;
    d.source_bytes = int64_t(t.nbytes);
    d.projected_bytes = d.source_bytes;
    const std::optional<ExpectedTensor> e = roles.Classify(t.name);
    if (e) {
      d.role = e->role;
      d.layer = e->layer;
      d.expert = e->expert;
    }
    const bool is_bias = e && e->is_bias;
    const bool float_matrix =
        t.shape.size() == 2 &&
        (t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32);
    int bits = 16;  // 16 = keep; 1 = ternary
    int group = opts.group_size;
    RotationKind rotation = opts.rotation;
    if (e && !is_bias && IsDecoderLinear(d.role)) {
      bits = LinearBits(opts, d.role, protect.count(d.layer) > 0);
      for (const auto& [part, b] : tensor_bits)
        if (t.name.find(part) != std::string::npos) bits = b;
      if (!IsAttention(d.role) && opts.mlp_group_size > 0) group = opts.mlp_group_size;
    } else if (e && !is_bias && (d.role == TensorRole::kEmbed || d.role == TensorRole::kLmHead)) {
      bits = opts.embed_bits;
      group = std::max(group, 32);  // fp16 scales: group 16 is for e8 linears only
      if (d.role == TensorRole::kEmbed) rotation = RotationKind::kNone;  // a lookup table
    }
    if (bits < 16 && !float_matrix) {
      d.note = fmt::format("{} {}: not a 2-D float tensor: kept as stored", DTypeName(t.dtype),
                           ShapeToString(t.shape));
      bits = 16;
    }
    if (bits < 16) {
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const GroupChoice g = ChooseGroup(cols, group, rotation, opts.max_hadamard_block);
      if (!g.note.empty()) {
        d.note = g.note;
        notes.insert(g.note);
      }
      if (g.quantizable) {
        d.quantize = true;
        d.format = bits == 1 ? quant::CodeFormat::kTernary : *quant::FormatForBits(bits);
        d.bits = quant::Traits(*d.format).bits_per_code;
        d.group_size = g.group_size;
        d.rotation_block = g.rotation_block;
        if (opts.scale_format == quant::ScaleFormat::kE8 && IsDecoderLinear(d.role) &&
            opts.method == quant::QuantMethod::kCodebook)
          d.scale_format = quant::ScaleFormat::kE8;
        d.projected_bytes =
            QuantizedTensorBytes(rows, cols, *d.format, d.group_size, opts.method, d.scale_format);
        if (d.rotation_block > 0) {
          d.rotation_group = RotationGroupKey(d.role, d.layer);
          if (signs_counted.insert(d.rotation_group).second) d.projected_bytes += SignBytes(cols);
        }
        AssignScaleTable(d);
        if (!d.scale_table.empty() && tables_counted.insert(d.scale_table).second)
          d.projected_bytes += kE8TableBytes;
      }
    }
    r.source_bytes += d.source_bytes;
    r.projected_bytes += d.projected_bytes;
    if (IsExpert(d.role)) r.projected_expert_bytes += d.projected_bytes;
    r.tensors.push_back(std::move(d));
  }
  r.notes.assign(notes.begin(), notes.end());
  return r;
}

}  // namespace tq
