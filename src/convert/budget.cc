#include "convert/budget.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "convert/convert.h"
#include "core/error.h"
#include "core/progress.h"
#include "quant/group_quantizer.h"
#include "quant/hadamard.h"
#include "quant/packing.h"

namespace tq {
namespace {

struct Candidate {
  int bits = 0, group = 0;
  int64_t rotation_block = 0;
  double stored_bits = 0;      // the budget's cost: LinearStoredBits, or file bits (target_bytes)
  double bits_per_weight = 0;  // stored_bits / weights
  double error = 0;            // relative
};

double Importance(const TensorDecision& d, int64_t num_layers, const BudgetOptions& o,
                  quant::ScaleFormat sf) {
  const double edge =
      o.edge_layer_weight > 0 ? o.edge_layer_weight : DefaultEdgeLayerWeight(o.target_bits, sf);
  double w = 1.0;
  if (d.role == TensorRole::kAttnV || d.role == TensorRole::kMlpDown ||
      d.role == TensorRole::kExpertDown)
    w *= o.sensitive_weight;
  if (d.layer == 0 || d.layer == num_layers - 1) w *= edge;
  return w;
}

}  // namespace

double DefaultEdgeLayerWeight(double target_bits, quant::ScaleFormat sf) {
  return sf == quant::ScaleFormat::kE8 && target_bits >= 3.0 ? 4.0 : 2.0;
}

int64_t ParseFileSize(std::string_view text, std::string_view flag) {
  const std::string where = fmt::format("{} {}", flag, text);
  std::string s;
  for (char ch : text)
    if (ch != ' ') s += char(std::toupper(static_cast<unsigned char>(ch)));
  size_t n = 0;
  while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
  const std::string num = s.substr(0, n), unit = s.substr(n);
  double v = 0;
  try {
    size_t used = 0;
    v = num.empty() ? -1 : std::stod(num, &used);
    if (used != num.size()) v = -1;
  } catch (const std::exception&) {
    v = -1;
  }
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"K", 1e3},
                                                          {"KB", 1e3},
                                                          {"KIB", 1024.0},
                                                          {"M", 1e6},
                                                          {"MB", 1e6},
                                                          {"MIB", 1048576.0},
                                                          {"G", 1e9},
                                                          {"GB", 1e9},
                                                          {"GIB", 1073741824.0},
                                                          {"T", 1e12},
                                                          {"TB", 1e12},
                                                          {"TIB", 1099511627776.0}};
  double mult = 0;
  for (const auto& [name, m] : kUnits)
    if (unit == name) mult = m;
  if (!(v > 0) || mult == 0)
    throw UsageError(where, "expected a size such as 13.2MB, 12.5MiB, 4.5GB or 4.2GiB");
  const double bytes = v * mult;
  if (bytes < 1 || bytes > 9e18) throw UsageError(where, "out of range");
  return int64_t(bytes);
}

int64_t EstimatedHeaderBytes(const QuantRecipe& recipe) {
  // One JSON entry per output tensor: "NAME":{"dtype":"U8","shape":[R,C],"data_offsets":[A,B]},
  // measured 65 bytes + the name on the shared models; 72 + a 12-byte suffix allowance here.
  constexpr int64_t kEntry = 72 + 12;
  int64_t bytes = 1024;  // {"__metadata__":...} and padding
  std::set<std::string> groups;
  for (const TensorDecision& d : recipe.tensors) {
    const int64_t name = int64_t(d.name.size());
    if (!d.quantize) {
      bytes += name + kEntry;
      continue;
    }
    bytes += 3 * (name + kEntry);  // codes, scales, codebook / minimums
    // A sign vector per rotation group and an e8 table per table group (the first member's).
    if (!d.rotation_group.empty() && groups.insert(d.rotation_group).second)
      bytes += int64_t(d.rotation_group.size()) + kEntry;
    if (!d.scale_table.empty() && groups.insert(d.scale_table).second)
      bytes += int64_t(d.scale_table.size()) + kEntry;
  }
  return bytes;
}

std::vector<BudgetChoice> AllocateBitBudget(
    QuantRecipe& recipe, const BudgetOptions& opts,
    const std::function<std::vector<uint8_t>(const TensorDecision&)>& read) {
  const QuantRecipeOptions& ro = recipe.options;
  const bool whole_file = opts.target_bytes > 0;
  const bool measured = !opts.alpha.empty();
  const std::string flag = whole_file ? fmt::format("--target-size {}", opts.target_bytes)
                                      : fmt::format("--budget-bpw {}", opts.target_bits);
  if (ro.method != quant::QuantMethod::kCodebook)
    throw UsageError(whole_file ? "--target-size" : "--budget-bpw", "needs --method turboquant");
  const quant::ScaleFormat sf = ro.scale_format;
  std::vector<int> groups = opts.groups;
  if (sf == quant::ScaleFormat::kE8 && std::find(groups.begin(), groups.end(), 16) == groups.end())
    groups.insert(groups.begin(), 16);
  int64_t num_layers = 0;
  for (const TensorDecision& d : recipe.tensors) num_layers = std::max(num_layers, d.layer + 1);

  // The tensors the budget re-chooses: quantized decoder linears (not ternary); for a whole-file
  // budget with measured sensitivities also the embedding / LM head.
  auto is_embedding = [](const TensorDecision& d) {
    return d.role == TensorRole::kEmbed || d.role == TensorRole::kLmHead;
  };
  std::vector<size_t> idx;
  std::vector<char> chosen(recipe.tensors.size(), 0);
  for (size_t i = 0; i < recipe.tensors.size(); ++i) {
    const TensorDecision& d = recipe.tensors[i];
    const bool linear =
        d.quantize && IsDecoderLinear(d.role) && d.format != quant::CodeFormat::kTernary;
    const bool embed = whole_file && measured && opts.embeddings && d.quantize && is_embedding(d);
    if (linear || embed) {
      idx.push_back(i);
      chosen[i] = 1;
    }
  }
  // What does not change counts at its own cost. --budget-bpw: kept / fixed linears and the e8
  // tables, in bits per linear weight. --target-size: every other tensor, all sign vectors and e8
  // tables and the header, in file bits.
  double fixed_bits = 0, total_weights = 0;
  if (whole_file) {
    std::set<std::string> signs, tables;
    fixed_bits = 8.0 * double(EstimatedHeaderBytes(recipe));
    for (size_t i = 0; i < recipe.tensors.size(); ++i) {
      const TensorDecision& d = recipe.tensors[i];
      if (d.quantize && d.rotation_block > 0 && signs.insert(d.rotation_group).second)
        fixed_bits += 8.0 * double(SignBytes(d.shape[1]));
      if (d.quantize && !d.scale_table.empty() && tables.insert(d.scale_table).second)
        fixed_bits += 8.0 * double(kE8TableBytes);
      if (chosen[i]) continue;
      fixed_bits +=
          8.0 * double(d.quantize ? QuantizedTensorBytes(d.shape[0], d.shape[1], *d.format,
                                                         d.group_size, ro.method, d.scale_format)
                                  : d.source_bytes);
    }
  } else {
    fixed_bits = ScaleTableBits(recipe.tensors);
    for (size_t i = 0; i < recipe.tensors.size(); ++i) {
      const TensorDecision& d = recipe.tensors[i];
      if (!IsDecoderLinear(d.role) || d.shape.size() != 2) continue;
      total_weights += double(NumElements(d.shape));
      if (chosen[i]) continue;
      fixed_bits += d.quantize ? LinearStoredBits(d.shape[0], d.shape[1], *d.format, d.group_size,
                                                  ro.method, d.scale_format)
                               : 8.0 * double(d.source_bytes);
    }
  }

  std::vector<std::vector<Candidate>> cands(idx.size());
  ProgressBar bar("budget: measuring errors", int64_t(idx.size()), opts.progress);
  for (size_t k = 0; k < idx.size(); ++k) {
    const TensorDecision& d = recipe.tensors[idx[k]];
    const int64_t rows = d.shape[0], cols = d.shape[1];
    const double n = double(rows) * double(cols);
    const bool embed = is_embedding(d);
    const std::vector<uint8_t> bytes = read(d);
    std::vector<float> w(size_t(rows * cols));
    ToF32(TensorView{bytes.data(), d.dtype, d.shape}, w.data());
    if (d.rotation_block > 0) {
      const quant::HadamardRotation rot(
          quant::HadamardSigns::Generate(cols, RotationGroupSeed(opts.seed, d.rotation_group)),
          d.rotation_block);
      rot.ForwardRows(w.data(), rows);
    }
    // The embedding is a lookup table (never rotated) and keeps fp16 scales, as does the LM head.
    const RotationKind rk = d.role == TensorRole::kEmbed ? RotationKind::kNone : ro.rotation;
    const quant::ScaleFormat csf = embed ? quant::ScaleFormat::kF16 : d.scale_format;
    const std::vector<int> cbits = embed ? std::vector<int>{4, 8} : opts.bits;
    for (int g : groups) {
      if (embed && g < 32) continue;
      const GroupChoice gc = ChooseGroup(cols, g, rk, ro.max_hadamard_block);
      if (!gc.quantizable || gc.group_size != g || gc.rotation_block != d.rotation_block) continue;
      for (int b : cbits) {
        quant::QuantSpec spec;
        spec.format = *quant::FormatForBits(b);
        spec.group_size = g;
        spec.scale.mode = opts.scale;
        spec.scale_format = csf;
        if (spec.format == quant::CodeFormat::kQ8)
          spec.codebook = &quant::LinearQ8Codebook();  // as convert
        Candidate c;
        c.bits = b;
        c.group = g;
        c.rotation_block = gc.rotation_block;
        c.stored_bits =
            whole_file
                ? 8.0 * double(QuantizedTensorBytes(rows, cols, spec.format, g, ro.method, csf))
                : LinearStoredBits(rows, cols, spec.format, g, ro.method, csf);
        c.bits_per_weight = c.stored_bits / n;
        c.error = quant::QuantizationError(w.data(), rows, cols, spec, d.name).relative();
        cands[k].push_back(c);
      }
    }
    if (embed) {  // kept as stored: no error
      Candidate c;
      c.bits = 16;
      c.stored_bits = 8.0 * double(d.source_bytes);
      c.bits_per_weight = c.stored_bits / n;
      cands[k].push_back(c);
    }
    TQ_CHECK(!cands[k].empty(), "budget", "no candidate for '{}'", d.name);
    bar.Update(int64_t(k) + 1, d.name);
  }
  bar.Finish();

  // Greedy: cheapest first, then the best error reduction per added bit while the budget lasts.
  std::vector<size_t> cur(idx.size());
  std::vector<double> imp(idx.size());
  double used = fixed_bits;
  for (size_t k = 0; k < idx.size(); ++k) {
    const TensorDecision& d = recipe.tensors[idx[k]];
    if (measured) {
      const auto a = opts.alpha.find(d.name);
      TQ_CHECK(a != opts.alpha.end(), "budget", "no measured sensitivity for '{}'", d.name);
      imp[k] = std::max(a->second, 1e-12);
    } else {
      imp[k] = Importance(d, num_layers, opts, sf);
      if (opts.objective == BudgetOptions::Objective::kPerWeight)
        imp[k] *= double(NumElements(d.shape));
    }
    size_t best = 0;
    for (size_t c = 1; c < cands[k].size(); ++c)
      if (cands[k][c].stored_bits < cands[k][best].stored_bits) best = c;
    cur[k] = best;
    used += cands[k][best].stored_bits;
  }
  const double budget =
      whole_file ? 8.0 * double(opts.target_bytes) : opts.target_bits * total_weights;
  if (used > budget + 1e-6) {
    throw UsageError(
        flag, whole_file ? fmt::format("below the smallest possible file, {:.2f} MB", used / 8e6)
                         : fmt::format("below the cheapest possible {:.3f} bits per linear "
                                       "weight",
                                       used / total_weights));
  }
  for (;;) {
    double best_ratio = 0;
    size_t bk = 0, bc = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const Candidate& now = cands[k][cur[k]];
      for (size_t c = 0; c < cands[k].size(); ++c) {
        const Candidate& up = cands[k][c];
        const double extra = up.stored_bits - now.stored_bits;
        const double gain = imp[k] * (now.error - up.error);
        if (extra <= 0 || gain <= 0 || used + extra > budget + 1e-6) continue;
        const double ratio = gain / extra;
        if (ratio > best_ratio) {
          best_ratio = ratio;
          bk = k;
          bc = c;
        }
      }
    }
    if (best_ratio <= 0) break;
    used += cands[bk][bc].stored_bits - cands[bk][cur[bk]].stored_bits;
    cur[bk] = bc;
  }

  // Apply, then recount projected bytes (signs once per rotation group).
  std::vector<BudgetChoice> out;
  for (size_t k = 0; k < idx.size(); ++k) {
    TensorDecision& d = recipe.tensors[idx[k]];
    const Candidate& c = cands[k][cur[k]];
    const std::string why = measured ? fmt::format(", sensitivity {:.4g}", imp[k]) : "";
    if (c.bits == 16) {  // the embedding / LM head kept as stored
      d.quantize = false;
      d.format.reset();
      d.bits = 0;
      d.group_size = 0;
      d.rotation_block = 0;
      d.rotation_group.clear();
      d.scale_table.clear();
      d.note = fmt::format("budget: kept as stored{}", why);
      out.push_back({d.name, 16, 0, 0.0, imp[k], d.source_bytes});
      continue;
    }
    d.format = *quant::FormatForBits(c.bits);
    d.bits = quant::Traits(*d.format).bits_per_code;
    d.group_size = c.group;
    d.rotation_block = c.rotation_block;
    d.note = fmt::format("budget: q{} g{} {}, relative error {:.5f}{}", c.bits, c.group,
                         quant::ScaleFormatName(d.scale_format), c.error, why);
    out.push_back({d.name, c.bits, c.group, c.error, imp[k], int64_t(c.stored_bits / 8)});
  }
  std::set<std::string> signs, tables;
  recipe.projected_bytes = 0;
  recipe.projected_expert_bytes = 0;
  for (TensorDecision& d : recipe.tensors) {
    if (d.quantize) {
      d.projected_bytes = QuantizedTensorBytes(d.shape[0], d.shape[1], *d.format, d.group_size,
                                               ro.method, d.scale_format);
      if (d.rotation_block > 0 && signs.insert(d.rotation_group).second)
        d.projected_bytes += SignBytes(d.shape[1]);
      if (!d.scale_table.empty() && tables.insert(d.scale_table).second)
        d.projected_bytes += kE8TableBytes;
    } else {
      d.projected_bytes = d.source_bytes;
    }
    recipe.projected_bytes += d.projected_bytes;
    if (IsExpert(d.role)) recipe.projected_expert_bytes += d.projected_bytes;
  }
  return out;
}

}  // namespace tq
