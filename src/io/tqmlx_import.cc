// turboquant-mlx directory -> native TurboQuant checkpoint in memory (see tqmlx_import.h).
#include "io/tqmlx_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/json_fields.h"
#include "quant/format.h"
#include "quant/hadamard.h"
#include "quant/hadamard_blocks.h"
#include "quant/packing.h"

namespace tq::tqmlx {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The quantization keys of turboquant-mlx's TurboQuantConfig.to_dict (+ what quantize_model.py
// adds). Any other key is an option this build does not know: an error, not a guess.
const std::set<std::string>& KnownKeys() {
  static const std::set<std::string> k = {"mode",
                                          "bits",
                                          "group_size",
                                          "use_qjl",
                                          "rotation",
                                          "rotation_seed",
                                          "fuse_rotations",
                                          "attn_bits",
                                          "mlp_bits",
                                          "mlp_group_size",
                                          "ternary_experts",
                                          "expert_down_bits",
                                          "codebook",
                                          "protect_expert_layers",
                                          "protect_bits"};
  return k;
}

struct Options {
  std::string rotation = "hadamard";
  bool use_qjl = false;
  bool skip_qjl = false;  // TURBOQUANT_MLX_SKIP_QJL=1
  // fuse_rotations: the projections (last name component) whose rotation went into the
  // preceding norm, from the architecture's entry in their integration/rotation_configs.py.
  std::set<std::string> fused;
};

// One quantized source linear (or SwitchLinear: `experts` > 0) and what it becomes.
struct LinearPlan {
  std::string source;               // their module prefix
  std::vector<std::string> target;  // ours, one per expert (one for a plain linear)
  int64_t experts = 0, out = 0, in = 0, groups = 0, words = 0;
  int bits = 0;  // bits per code in their words; 0 = trits
  quant::CodeFormat format = quant::CodeFormat::kQ4;
  std::vector<float> codebook;  // ascending
  std::vector<uint8_t> remap;   // their code -> index into `codebook`
  bool rotated = false;
  bool fused = false;  // fuse_rotations: input not rotated, weights used as stored
  int64_t block = 0;
  std::vector<uint8_t> sign_bits;  // HadamardSigns::ToBits when rotated
  quant::HadamardSigns signs;      // the ±1 themselves when rotated
  bool bias = false;
  // QJL residual (<p>.qjl_packed / qjl_norms / qjl_signs): the linear becomes a dense F32 weight.
  bool qjl = false;
  quant::HadamardSigns qjl_signs;  // σ [in]
};

struct Source {
  std::string dir, where;
  json config;
  Options opt;
  std::unique_ptr<Checkpoint> stored;
  std::vector<LinearPlan> linears;
  std::vector<std::string> passthrough;  // stored tensors served as they are
  // Unquantized stacked experts ("<X>.switch_mlp.<proj>.weight" [E, out, in], e.g. a width the
  // group size does not divide): stored name -> per-expert names (slices of it).
  std::vector<std::pair<std::string, std::vector<std::string>>> stacked;
  std::vector<std::string> dropped;  // QJL tensors with skip_qjl
};

std::string Where(const std::string& dir) { return std::string(kFormatName) + " " + dir; }

// "<X>.switch_mlp.<proj>" -> the per-expert name pattern of Hugging Face checkpoints (mlx-lm's
// sanitize stacks those into the SwitchLinear). {E} is the expert index.
std::string ExpertPattern(const std::string& prefix, const std::string& where) {
  const std::string key = ".switch_mlp.";
  const size_t at = prefix.rfind(key);
  const std::string parent = prefix.substr(0, at), proj = prefix.substr(at + key.size());
  if (parent.ends_with(".block_sparse_moe")) {  // mixtral: w1 = gate, w3 = up, w2 = down
    static const std::map<std::string, std::string> w = {
        {"gate_proj", "w1"}, {"up_proj", "w3"}, {"down_proj", "w2"}};
    const auto it = w.find(proj);
    TQ_CHECK(it != w.end(), where, "tensor '{}.weight': unknown expert projection '{}'", prefix,
             proj);
    return parent + ".experts.{E}." + it->second;
  }
  TQ_CHECK(proj == "gate_proj" || proj == "up_proj" || proj == "down_proj", where,
           "tensor '{}.weight': unknown expert projection '{}'", prefix, proj);
  return parent + ".experts.{E}." + proj;
}

std::string ExpertName(const std::string& pattern, int64_t e) {
  std::string s = pattern;
  s.replace(s.find("{E}"), 3, std::to_string(e));
  return s;
}

// Their integration/rotation_configs.py: per architecture, the projections whose input comes
// straight from a norm (fuse_norm_to_projs). Those had needs_rotation = false when a checkpoint
// was written with fuse_rotations; an architecture missing there could not be converted so.
std::optional<std::set<std::string>> FusedProjections(const std::string& arch) {
  static const std::set<std::string> llama = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"};
  static const std::map<std::string, std::set<std::string>> table = {
      {"llama", llama},
      {"mistral", llama},
      {"qwen2", llama},
      {"qwen3", llama},
      {"yi", llama},
      {"codellama", llama},
      {"internlm2", llama},
      {"qwen3_5", llama},
      {"qwen2_moe", llama},
      {"qwen3_5_moe", llama},
      {"gpt_oss", llama},
      {"gemma", llama},
      {"gemma2", llama},
      {"gemma3", llama},
      {"phi", {"q_proj", "k_proj", "v_proj", "fc1"}},
      {"phi3", {"qkv_proj", "gate_up_proj"}},
      {"phi3small", {"qkv_proj", "gate_up_proj"}},
      {"starcoder2", {"q_proj", "k_proj", "v_proj", "c_fc"}}};
  const auto it = table.find(arch);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

std::string ModelType(const json& config) {
  std::string t;
  if (config.contains("model_type") && config["model_type"].is_string())
    t = config["model_type"].get<std::string>();
  else if (config.contains("text_config") && config["text_config"].is_object() &&
           config["text_config"].contains("model_type") &&
           config["text_config"]["model_type"].is_string())
    t = config["text_config"]["model_type"].get<std::string>();
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

Options ParseOptions(const json& q, const std::string& arch, const std::string& where) {
  Options o;
  for (const auto& [k, v] : q.items()) {
    if (k == "affine_extras")
      Fail(where,
           "quantization.affine_extras: MLX affine-quantized tensors (embeddings, extras) are not "
           "supported; re-convert with turboquant-mlx without --extras");
    TQ_CHECK(KnownKeys().count(k) != 0, where,
             "quantization.{} is not a turboquant-mlx option this build knows (known: mode, bits, "
             "group_size, use_qjl, rotation, rotation_seed, fuse_rotations, attn_bits, mlp_bits, "
             "mlp_group_size, ternary_experts, expert_down_bits, codebook, "
             "protect_expert_layers, protect_bits)",
             k);
  }
  const JsonFields f(q, where, "quantization.");
  if (auto r = f.String("rotation")) o.rotation = *r;
  TQ_CHECK(o.rotation == "hadamard" || o.rotation == "blockwise_hadamard" || o.rotation == "none",
           where,
           "quantization.rotation '{}' is not supported (hadamard, blockwise_hadamard, none)",
           o.rotation);
  if (f.Bool("fuse_rotations").value_or(false) && o.rotation != "none") {
    const auto fused = FusedProjections(arch);
    TQ_CHECK(fused.has_value(), where,
             "quantization.fuse_rotations = true for model_type '{}', which turboquant-mlx's "
             "rotation configs do not list: which projections had their rotation fused into a "
             "norm is unknown",
             arch);
    o.fused = *fused;
  }
  o.use_qjl = f.Bool("use_qjl").value_or(false);
  const char* skip = std::getenv("TURBOQUANT_MLX_SKIP_QJL");
  o.skip_qjl = skip && std::string(skip) == "1";
  return o;
}

// Reads a float vector of a stored tensor (F16/BF16/F32), checking rank 1 and the size.
std::vector<float> ReadVector(const Checkpoint& c, const std::string& name, int64_t size,
                              const std::string& where) {
  TQ_CHECK(c.Has(name), where, "missing tensor '{}'", name);
  const TensorView v = c.View(name);
  TQ_CHECK(v.rank() == 1 && (size < 0 || v.dim(0) == size) &&
               (v.dtype == DType::F16 || v.dtype == DType::BF16 || v.dtype == DType::F32),
           where, "tensor '{}' is {} {}, expected F16 [{}]", name, DTypeName(v.dtype),
           ShapeToString(v.shape), size < 0 ? std::string("levels") : std::to_string(size));
  std::vector<float> out(size_t(v.dim(0)));
  ToF32(v, out.data());
  return out;
}

// The QJL tensors of <p>, when present and not dropped: checked, σ read.
void PlanQjl(const Source& s, const std::string& p, LinearPlan& L) {
  const Checkpoint& c = *s.stored;
  const std::string& where = s.where;
  const bool any = c.Has(p + ".qjl_packed") || c.Has(p + ".qjl_norms") || c.Has(p + ".qjl_signs");
  if (!any || s.opt.skip_qjl) return;
  TQ_CHECK(s.opt.use_qjl, where,
           "'{}' has QJL tensors but quantization.use_qjl is false (their loader would not use "
           "them); set TURBOQUANT_MLX_SKIP_QJL=1 to drop them",
           p);
  TQ_CHECK(!L.experts, where,
           "tensor '{}.qjl_packed': QJL on stacked experts (turboquant-mlx's SwitchLinear has "
           "none) is not supported",
           p);
  for (const char* t : {".qjl_packed", ".qjl_norms", ".qjl_signs"})
    TQ_CHECK(c.Has(p + t), where, "missing tensor '{}{}' (the other QJL tensors are there)", p, t);
  const TensorView packed = c.View(p + ".qjl_packed");
  TQ_CHECK(packed.dtype == DType::U32 && packed.rank() == 2 && packed.dim(0) == L.out &&
               packed.dim(1) == (L.in + 31) / 32,
           where, "tensor '{}.qjl_packed' is {} {}, expected U32 [{}, {}]", p,
           DTypeName(packed.dtype), ShapeToString(packed.shape), L.out, (L.in + 31) / 32);
  ReadVector(c, p + ".qjl_norms", L.out, where);  // shape and dtype
  const std::vector<float> sigma = ReadVector(c, p + ".qjl_signs", L.in, where);
  std::vector<int8_t> s8;
  for (float v : sigma) {
    TQ_CHECK(v == 1.0f || v == -1.0f, where,
             "tensor '{}.qjl_signs' holds {}, expected only +1 / -1", p, v);
    s8.push_back(v < 0 ? -1 : 1);
  }
  L.qjl_signs = quant::HadamardSigns::FromInt8(s8);
  const int64_t qb = MlxHadamardBlock(L.in);
  TQ_CHECK(quant::IsHadamardBlock(qb), where, "'{}': QJL projection block {}", p, qb);
  L.qjl = true;
}

LinearPlan PlanLinear(const Source& s, const std::string& p) {
  const Checkpoint& c = *s.stored;
  const std::string& where = s.where;
  LinearPlan L;
  L.source = p;
  const TensorView w = c.View(p + ".weight");
  L.experts = p.find(".switch_mlp.") != std::string::npos ? 1 : 0;
  TQ_CHECK(w.dtype == DType::U32 && w.rank() == (L.experts ? 3 : 2), where,
           "tensor '{}.weight' is {} {}, expected U32 [{}out, words]", p, DTypeName(w.dtype),
           ShapeToString(w.shape), L.experts ? "experts, " : "");
  if (L.experts) L.experts = w.dim(0);
  L.out = w.dim(-2);
  L.words = w.dim(-1);

  // Codebook: its length gives the format (2^b levels; 3 = ternary).
  std::vector<float> cb = ReadVector(c, p + ".codebook", -1, where);
  const int k = int(cb.size());
  const auto fmt = quant::FormatForLevels(k);
  TQ_CHECK(fmt && k <= 16, where,
           "tensor '{}.codebook' has {} levels: turboquant-mlx codebooks have 2, 3, 4, 8 or 16", p,
           k);
  L.format = *fmt;
  L.bits = k == 3 ? 0 : quant::Traits(*fmt).code_bits;
  for (float v : cb)
    TQ_CHECK(std::isfinite(v), where, "tensor '{}.codebook' has a non-finite level", p);
  std::vector<int> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cb[a] < cb[b]; });
  L.remap.resize(size_t(k));
  for (int i = 0; i < k; ++i) {
    L.codebook.push_back(cb[size_t(order[size_t(i)])]);
    L.remap[size_t(order[size_t(i)])] = uint8_t(i);
  }
  for (int i = 1; i < k; ++i)
    TQ_CHECK(L.codebook[size_t(i)] > L.codebook[size_t(i - 1)], where,
             "tensor '{}.codebook' has two equal levels ({})", p, L.codebook[size_t(i)]);

  // Scales give the input size with the signs: in = signs, groups = scales' last dim.
  const std::vector<float> signs = ReadVector(c, p + ".signs", -1, where);
  L.in = int64_t(signs.size());
  const int per_word = L.bits == 0 ? 20 : 32 / L.bits;
  TQ_CHECK(L.words == (L.in + per_word - 1) / per_word, where,
           "tensor '{}.weight' has {} words per row; {} inputs at {} codes per word need {}", p,
           L.words, L.in, per_word, (L.in + per_word - 1) / per_word);
  TQ_CHECK(c.Has(p + ".scales"), where, "missing tensor '{}.scales'", p);
  const TensorView sc = c.View(p + ".scales");
  const bool scales_ok = sc.dtype == DType::F16 && sc.rank() == w.rank() && sc.dim(-2) == L.out &&
                         sc.dim(-1) > 0 && L.in % sc.dim(-1) == 0 &&
                         (!L.experts || sc.dim(0) == L.experts);
  TQ_CHECK(scales_ok, where, "tensor '{}.scales' is {} {}, expected F16 [{}{}, groups dividing {}]",
           p, DTypeName(sc.dtype), ShapeToString(sc.shape),
           L.experts ? std::to_string(L.experts) + ", " : "", L.out, L.in);
  L.groups = sc.dim(-1);

  // Rotation: their loader's rule (tqmlx_import.h).
  bool any_negative = false;
  for (float v : signs) {
    TQ_CHECK(v == 1.0f || v == -1.0f, where, "tensor '{}.signs' holds {}, expected only +1 / -1", p,
             v);
    any_negative |= v < 0;
  }
  L.fused = s.opt.fused.count(p.substr(p.rfind('.') + 1)) != 0;
  L.rotated = !L.fused && (s.opt.rotation != "none" || any_negative);
  if (L.rotated) {
    L.block = MlxHadamardBlock(L.in);  // m * 2^k, m in {1, 12, 20, 28}: quant/hadamard.h
    TQ_CHECK(L.block % 8 == 0, where,
             "'{}': its rotation uses a {}-point Hadamard block; blocks that are no multiple of 8 "
             "are not supported (the native signs layout is [in / block, block / 8])",
             p, L.block);
    std::vector<int8_t> s8(signs.size());
    for (size_t i = 0; i < signs.size(); ++i) s8[i] = signs[i] < 0 ? -1 : 1;
    L.signs = quant::HadamardSigns::FromInt8(s8);
    L.sign_bits = L.signs.ToBits();
  }
  PlanQjl(s, p, L);

  L.bias = c.Has(p + ".bias");
  if (L.experts) {
    TQ_CHECK(!L.bias, where, "tensor '{}.bias': expert biases are not supported", p);
    const std::string pattern = ExpertPattern(p, where);
    for (int64_t e = 0; e < L.experts; ++e) L.target.push_back(ExpertName(pattern, e));
  } else {
    L.target.push_back(p);
    if (L.bias) {
      const TensorView b = c.View(p + ".bias");
      TQ_CHECK(b.rank() == 1 && b.dim(0) == L.out && IsFloat(b.dtype), where,
               "tensor '{}.bias' is {} {}, expected a float vector [{}]", p, DTypeName(b.dtype),
               ShapeToString(b.shape), L.out);
    }
  }
  return L;
}

Source Analyze(const std::string& dir) {
  Source s;
  s.dir = dir;
  s.where = Where(dir);
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  s.config = ParseJson(ReadFileToString(cfg_path), "config " + cfg_path);
  s.opt = ParseOptions(s.config["quantization"], ModelType(s.config), "config " + cfg_path);
  s.stored = Checkpoint::OpenStored(dir);
  const Checkpoint& c = *s.stored;
  const std::vector<std::string> names = c.Names();
  std::set<std::string> used;
  for (const std::string& n : names) {
    if (!n.ends_with(".codebook")) continue;
    const std::string p = n.substr(0, n.size() - std::string(".codebook").size());
    TQ_CHECK(c.Has(p + ".weight"), s.where, "tensor '{}' without '{}.weight'", n, p);
    s.linears.push_back(PlanLinear(s, p));
    for (const char* suffix : {".weight", ".scales", ".codebook", ".signs"})
      used.insert(p + suffix);
    if (s.linears.back().bias) used.insert(p + ".bias");
    if (s.linears.back().qjl)
      for (const char* suffix : {".qjl_packed", ".qjl_norms", ".qjl_signs"})
        used.insert(p + suffix);
  }
  TQ_CHECK(!s.linears.empty(), s.where,
           "config.json has a turboquant-mlx quantization block but no tensor has a '.codebook'");
  for (const std::string& n : names) {
    if (used.count(n)) continue;
    if (n.ends_with(".qjl_packed") || n.ends_with(".qjl_norms") || n.ends_with(".qjl_signs")) {
      TQ_CHECK(s.opt.skip_qjl, s.where,
               "tensor '{}': a QJL tensor of no quantized linear (no '.codebook' beside it)", n);
      s.dropped.push_back(n);
      continue;
    }
    const TensorInfo& i = c.Info(n);
    TQ_CHECK(i.dtype != DType::U32, s.where,
             "tensor '{}' is U32 packed data without a '.codebook' (an MLX affine-quantized "
             "tensor?): not supported",
             n);
    TQ_CHECK(!n.ends_with(".biases"), s.where,
             "tensor '{}': MLX affine quantization (scales + biases) is not supported", n);
    if (n.find(".switch_mlp.") != std::string::npos) {
      TQ_CHECK(n.ends_with(".weight") && i.shape.size() == 3 && IsFloat(i.dtype), s.where,
               "tensor '{}' is {} {}: a stacked expert tensor must be a float [experts, out, in] "
               "weight",
               n, DTypeName(i.dtype), ShapeToString(i.shape));
      const std::string pattern = ExpertPattern(n.substr(0, n.size() - 7), s.where);
      std::vector<std::string> per;
      for (int64_t e = 0; e < i.shape[0]; ++e) per.push_back(ExpertName(pattern, e) + ".weight");
      s.stacked.emplace_back(n, std::move(per));
      continue;
    }
    s.passthrough.push_back(n);
  }
  return s;
}

json NativeQuantization(const Source& s) {
  json tensors = json::object();
  int64_t linears = 0;
  for (const LinearPlan& L : s.linears) {
    if (L.qjl) continue;  // a dense F32 weight
    for (const std::string& t : L.target) {
      json e = {{"format", std::string(quant::Traits(L.format).name)},
                {"shape", {L.out, L.in}},
                {"group_size", L.in / L.groups},
                {"scales", "f16"},
                {"rotation_group", L.rotated ? json(L.source) : json(nullptr)}};
      if (L.rotated) e["rotation_block"] = L.block;
      tensors[t] = std::move(e);
      ++linears;
    }
  }
  json q = {{"mode", "turboquant"},   {"format_version", 2},
            {"method", "turboquant"}, {"imported_from", kFormatName},
            {"scale_format", "f16"},  {"tensors", std::move(tensors)}};
  if (!s.dropped.empty()) q["dropped_tensors"] = s.dropped;
  return q;
}

// Codes of one row: their words -> our packing, through the codebook order.
void RepackRow(const LinearPlan& L, const uint32_t* words, uint8_t* out, uint8_t* scratch,
               const std::string& where) {
  UnpackWords(words, L.bits, L.in, scratch, where);  // codes < 2^bits (or 3): in remap's range
  for (int64_t j = 0; j < L.in; ++j) scratch[j] = L.remap[scratch[j]];
  quant::PackCodes(L.format, scratch, L.in, out);
}

// One row of a QJL linear in the un-rotated input basis, F32 [in]:
//   w = Rᵀ (deq + α ν Sᵀ b),  α = √(π/2) / √in,
// deq = scale * codebook[code] (the rotated-domain weights), b ∈ {±1}^in the stored bits (1 = +1),
// ν the row's residual norm, S = blockdiag(H) diag(σ) / √block the QJL projection (their
// core/qjl.py: the correction α ν ⟨b, S x'⟩ added to the product with the rotated input x').
void DenseQjlRow(const LinearPlan& L, const Checkpoint& c, int64_t r, float* w, uint8_t* scratch,
                 float* t, const std::string& where) {
  const TensorView weight = c.View(L.source + ".weight");
  UnpackWords(weight.as<uint32_t>() + r * L.words, L.bits, L.in, scratch, where);
  const TensorView sc = c.View(L.source + ".scales");
  const uint16_t* scales = sc.as<uint16_t>() + r * L.groups;
  const int64_t g = L.in / L.groups;
  for (int64_t j = 0; j < L.in; ++j)
    w[j] = F16ToF32(scales[j / g]) * L.codebook[L.remap[scratch[j]]];
  const uint32_t* bits = c.View(L.source + ".qjl_packed").as<uint32_t>() + r * ((L.in + 31) / 32);
  for (int64_t j = 0; j < L.in; ++j) t[j] = (bits[j / 32] >> (j % 32) & 1) ? 1.0f : -1.0f;
  quant::RotateInverse(L.qjl_signs, MlxHadamardBlock(L.in), t);
  float nu = 0;
  ToF32(c.View(L.source + ".qjl_norms"), r, 1, &nu);
  const float k = float(std::sqrt(M_PI / 2.0) / std::sqrt(double(L.in))) * nu;
  for (int64_t j = 0; j < L.in; ++j) w[j] += k * t[j];
  if (L.rotated) quant::RotateInverse(L.signs, L.block, w);
}

std::string DescribeSource(const Source& s) {
  std::map<std::string, int64_t> kinds;  // "q3 g64" -> linears
  int64_t total = 0;
  int64_t qjl = 0, fused = 0;
  for (const LinearPlan& L : s.linears) {
    qjl += L.qjl;
    fused += L.fused ? int64_t(L.target.size()) : 0;
    const char* how = L.rotated ? "" : (L.fused ? " fused" : " unrotated");
    const std::string k =
        fmt::format("{} g{}{}", quant::Traits(L.format).name, L.in / L.groups, how);
    kinds[k] += int64_t(L.target.size());
    total += int64_t(L.target.size());
  }
  std::string parts;
  for (const auto& [k, n] : kinds)
    parts += fmt::format("{}{} x {}", parts.empty() ? "" : ", ", n, k);
  std::string extra;
  if (fused)
    extra += fmt::format("; {} with the rotation fused into their norm (input not rotated)", fused);
  if (qjl) extra += fmt::format("; {} with QJL residuals, materialized as dense f32 weights", qjl);
  if (!s.dropped.empty()) extra += "; QJL tensors dropped (TURBOQUANT_MLX_SKIP_QJL=1)";
  return fmt::format("{} checkpoint: {} linears ({}), repacked in memory{}", kFormatName, total,
                     parts, extra);
}

std::function<void(const std::string&)>& NoticeFn() {
  static std::function<void(const std::string&)> fn = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  return fn;
}

}  // namespace

bool IsTqMlxConfig(const std::string& config_json) {
  const json j = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("quantization")) return false;
  const json& q = j["quantization"];
  return q.is_object() && q.contains("mode") && q["mode"] == "turboquant" &&
         !q.contains("format_version");
}

bool IsTqMlxDir(const std::string& dir) {
  std::error_code ec;
  const fs::path p = fs::path(dir) / "config.json";
  if (!fs::is_regular_file(p, ec)) return false;
  return IsTqMlxConfig(ReadFileToString(p.string()));
}

int64_t MlxHadamardBlock(int64_t n) {
  int64_t best = 1;
  for (int64_t m : {1, 12, 20, 28})
    for (int64_t size = m; size <= n; size *= 2)
      if (n % size == 0) best = std::max(best, size);
  return best;
}

void UnpackWords(const uint32_t* words, int bits, int64_t n, uint8_t* codes,
                 const std::string& where) {
  if (bits == 0) {
    for (int64_t w = 0, j = 0; j < n; ++w) {
      uint32_t v = words[w];
      TQ_CHECK(v < 3486784401u, where, "trit word {} is {} (>= 3^20)", w, v);
      for (int t = 0; t < 20 && j < n; ++t, ++j) {
        codes[j] = uint8_t(v % 3);
        v /= 3;
      }
    }
    return;
  }
  TQ_CHECK(bits >= 1 && bits <= 8, where, "{} bits per code", bits);
  const int per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t j = 0; j < n; ++j) codes[j] = uint8_t((words[j / per] >> ((j % per) * bits)) & mask);
}

std::unique_ptr<Checkpoint> Import(const std::string& dir, bool headers_only) {
  Source s = Analyze(dir);
  const Checkpoint& stored = *s.stored;
  // Pointers into the mappings stay valid: the files move, the mappings do not.
  auto c = Checkpoint::FromParts(dir, kFormatName, s.stored->ReleaseShards());
  auto alias = [&](const std::string& name, const std::string& from, DType dt, Shape shape,
                   uint64_t byte_offset) {
    const TensorInfo& i = stored.Info(from);
    const uint64_t n = uint64_t(NumElements(shape)) * DTypeSize(dt);
    if (headers_only) return c->AddDeclared(name, dt, std::move(shape));
    c->AddAlias(name, dt, std::move(shape), i.shard,
                static_cast<const uint8_t*>(stored.View(from).data) + byte_offset, n);
  };
  for (const std::string& n : s.passthrough) {
    const TensorInfo& i = stored.Info(n);
    alias(n, n, i.dtype, i.shape, 0);
  }
  for (const auto& [from, per] : s.stacked) {
    const TensorInfo& i = stored.Info(from);
    const uint64_t slice = uint64_t(i.shape[1] * i.shape[2]) * DTypeSize(i.dtype);
    for (size_t e = 0; e < per.size(); ++e)
      alias(per[e], from, i.dtype, {i.shape[1], i.shape[2]}, e * slice);
  }
  for (const LinearPlan& L : s.linears) {
    if (L.qjl) {
      const std::string& t = L.target[0];
      if (L.bias)
        alias(t + ".bias", L.source + ".bias", stored.Info(L.source + ".bias").dtype, {L.out}, 0);
      if (headers_only) {
        c->AddDeclared(t + ".weight", DType::F32, {L.out, L.in});
        continue;
      }
      std::vector<uint8_t> dense(size_t(L.out * L.in) * sizeof(float));
      float* out = reinterpret_cast<float*>(dense.data());
      const std::string where = s.where + ": tensor '" + L.source + ".weight'";
      ThreadPool::Global().ParallelFor(L.out, 16, [&](int64_t r0, int64_t r1) {
        std::vector<uint8_t> scratch(size_t(L.in) + 32);
        std::vector<float> tmp(size_t(L.in));
        for (int64_t r = r0; r < r1; ++r)
          DenseQjlRow(L, stored, r, out + r * L.in, scratch.data(), tmp.data(), where);
      });
      c->AddOwned(t + ".weight", DType::F32, {L.out, L.in}, std::move(dense));
      continue;
    }
    const int64_t row_bytes = int64_t(quant::PackedBytes(L.format, L.in));
    const TensorView w = stored.View(L.source + ".weight");
    for (size_t e = 0; e < L.target.size(); ++e) {
      const std::string& t = L.target[e];
      alias(t + ".scales", L.source + ".scales", DType::F16, {L.out, L.groups},
            uint64_t(e) * uint64_t(L.out * L.groups) * 2);
      std::vector<uint8_t> cb(L.codebook.size() * 4);
      std::memcpy(cb.data(), L.codebook.data(), cb.size());
      c->AddOwned(t + ".codebook", DType::F32, {int64_t(L.codebook.size())}, std::move(cb));
      if (L.bias)
        alias(t + ".bias", L.source + ".bias", stored.Info(L.source + ".bias").dtype, {L.out}, 0);
      if (headers_only) {
        c->AddDeclared(t + ".codes", DType::U8, {L.out, row_bytes});
        continue;
      }
      std::vector<uint8_t> codes(size_t(L.out * row_bytes));
      const uint32_t* base = w.as<uint32_t>() + int64_t(e) * L.out * L.words;
      const std::string where = s.where + ": tensor '" + L.source + ".weight'";
      ThreadPool::Global().ParallelFor(L.out, 16, [&](int64_t r0, int64_t r1) {
        std::vector<uint8_t> scratch(size_t(L.in) + 32);
        for (int64_t r = r0; r < r1; ++r)
          RepackRow(L, base + r * L.words, codes.data() + r * row_bytes, scratch.data(), where);
      });
      c->AddOwned(t + ".codes", DType::U8, {L.out, row_bytes}, std::move(codes));
    }
    if (L.rotated) {
      std::vector<uint8_t> bits = L.sign_bits;
      c->AddOwned(L.source + ".signs", DType::U8, {L.in / L.block, L.block / 8}, std::move(bits));
    }
  }
  if (!headers_only && NoticeFn()) NoticeFn()(dir + ": " + DescribeSource(s));
  return c;
}

std::string NativeConfigJson(const std::string& dir) {
  Source s = Analyze(dir);
  json cfg = s.config;
  cfg["source_quantization"] = cfg["quantization"];
  cfg["quantization"] = NativeQuantization(s);
  return cfg.dump(2);
}

std::string Describe(const std::string& dir) { return DescribeSource(Analyze(dir)); }

void SetNotice(std::function<void(const std::string&)> fn) { NoticeFn() = std::move(fn); }

}  // namespace tq::tqmlx
