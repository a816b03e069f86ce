#include "convert/budget.h"

#include <set>

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
  double bits_per_weight = 0;  // codes + group scales: LinearStoredBits
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

std::vector<BudgetChoice> AllocateBitBudget(
    QuantRecipe& recipe, const BudgetOptions& opts,
    const std::function<std::vector<uint8_t>(const TensorDecision&)>& read) {
  const QuantRecipeOptions& ro = recipe.options;
  if (ro.method != quant::QuantMethod::kCodebook)
    throw UsageError("--budget-bpw", "needs --method turboquant");
  const quant::ScaleFormat sf = ro.scale_format;
  std::vector<int> groups = opts.groups;
  if (sf == quant::ScaleFormat::kE8 && std::find(groups.begin(), groups.end(), 16) == groups.end())
    groups.insert(groups.begin(), 16);
  int64_t num_layers = 0;
  for (const TensorDecision& d : recipe.tensors) num_layers = std::max(num_layers, d.layer + 1);

  std::vector<size_t> idx;  // the tensors the budget re-chooses
  for (size_t i = 0; i < recipe.tensors.size(); ++i) {
    const TensorDecision& d = recipe.tensors[i];
    if (d.quantize && IsDecoderLinear(d.role) && d.format != quant::CodeFormat::kTernary)
      idx.push_back(i);
  }
  // Kept / fixed linears count against the budget at their own cost, and so do the e8 scale
  // tables (one per rotation group, whatever the choices).
  double fixed_bits = ScaleTableBits(recipe.tensors), total_weights = 0;
  for (size_t i = 0; i < recipe.tensors.size(); ++i) {
    const TensorDecision& d = recipe.tensors[i];
    if (!IsDecoderLinear(d.role) || d.shape.size() != 2) continue;
    const double n = double(NumElements(d.shape));
    total_weights += n;
    if (std::find(idx.begin(), idx.end(), i) != idx.end()) continue;
    fixed_bits += d.quantize ? LinearStoredBits(d.shape[0], d.shape[1], *d.format, d.group_size,
                                                ro.method, d.scale_format)
                             : 8.0 * double(d.source_bytes);
  }

  std::vector<std::vector<Candidate>> cands(idx.size());
  ProgressBar bar("budget: measuring errors", int64_t(idx.size()), opts.progress);
  for (size_t k = 0; k < idx.size(); ++k) {
    const TensorDecision& d = recipe.tensors[idx[k]];
    const int64_t rows = d.shape[0], cols = d.shape[1];
    const std::vector<uint8_t> bytes = read(d);
    std::vector<float> w(size_t(rows * cols));
    ToF32(TensorView{bytes.data(), d.dtype, d.shape}, w.data());
    if (d.rotation_block > 0) {
      const quant::HadamardRotation rot(
          quant::HadamardSigns::Generate(cols, RotationGroupSeed(opts.seed, d.rotation_group)),
          d.rotation_block);
      rot.ForwardRows(w.data(), rows);
    }
    for (int g : groups) {
      const GroupChoice gc = ChooseGroup(cols, g, ro.rotation, ro.max_hadamard_block);
      if (!gc.quantizable || gc.group_size != g || gc.rotation_block != d.rotation_block) continue;
      for (int b : opts.bits) {
        quant::QuantSpec spec;
        spec.format = *quant::FormatForBits(b);
        spec.group_size = g;
        spec.scale.mode = opts.scale;
        spec.scale_format = d.scale_format;
        const double bpw = LinearStoredBits(rows, cols, spec.format, g, ro.method, d.scale_format) /
                           (double(rows) * double(cols));
        Candidate c{b, g, gc.rotation_block, bpw,
                    quant::QuantizationError(w.data(), rows, cols, spec, d.name).relative()};
        cands[k].push_back(c);
      }
    }
    TQ_CHECK(!cands[k].empty(), "budget", "no candidate for '{}'", d.name);
    bar.Update(int64_t(k) + 1, d.name);
  }
  bar.Finish();

  // Greedy: cheapest first, then the best error reduction per added bit while the budget lasts.
  std::vector<size_t> cur(idx.size());
  std::vector<double> weight(idx.size()), imp(idx.size());
  double used = fixed_bits;
  for (size_t k = 0; k < idx.size(); ++k) {
    const TensorDecision& d = recipe.tensors[idx[k]];
    weight[k] = double(NumElements(d.shape));
    imp[k] = Importance(d, num_layers, opts, sf);
    if (opts.objective == BudgetOptions::Objective::kPerWeight) imp[k] *= weight[k];
    size_t best = 0;
    for (size_t c = 1; c < cands[k].size(); ++c)
      if (cands[k][c].bits_per_weight < cands[k][best].bits_per_weight) best = c;
    cur[k] = best;
    used += weight[k] * cands[k][best].bits_per_weight;
  }
  const double budget = opts.target_bits * total_weights;
  if (used > budget + 1e-6)
    throw UsageError(fmt::format("--budget-bpw {}", opts.target_bits),
                     fmt::format("below the cheapest possible {:.3f} bits per linear weight",
                                 used / total_weights));
  for (;;) {
    double best_ratio = 0;
    size_t bk = 0, bc = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const Candidate& now = cands[k][cur[k]];
      for (size_t c = 0; c < cands[k].size(); ++c) {
        const Candidate& up = cands[k][c];
        const double extra = weight[k] * (up.bits_per_weight - now.bits_per_weight);
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
    used += weight[bk] * (cands[bk][bc].bits_per_weight - cands[bk][cur[bk]].bits_per_weight);
    cur[bk] = bc;
  }

  // Apply, then recount projected bytes (signs once per rotation group).
  std::vector<BudgetChoice> out;
  for (size_t k = 0; k < idx.size(); ++k) {
    TensorDecision& d = recipe.tensors[idx[k]];
    const Candidate& c = cands[k][cur[k]];
    d.format = *quant::FormatForBits(c.bits);
    d.bits = quant::Traits(*d.format).bits_per_code;
    d.group_size = c.group;
    d.rotation_block = c.rotation_block;
    d.note = fmt::format("budget: q{} g{} {}, relative error {:.5f}", c.bits, c.group,
                         quant::ScaleFormatName(d.scale_format), c.error);
    out.push_back({d.name, c.bits, c.group, c.error, imp[k]});
  }
  std::set<std::string> signs, tables;
  recipe.projected_bytes = 0;
  for (TensorDecision& d : recipe.tensors) {
    if (d.quantize) {
      d.projected_bytes = QuantizedTensorBytes(d.shape[0], d.shape[1], *d.format, d.group_size,
                                               ro.method, d.scale_format);
      if (d.rotation_block > 0 && signs.insert(d.rotation_group).second)
        d.projected_bytes += SignBytes(d.shape[1]);
      if (!d.scale_table.empty() && tables.insert(d.scale_table).second)
        d.projected_bytes += kE8TableBytes;
    }
    recipe.projected_bytes += d.projected_bytes;
  }
  return out;
}

}  // namespace tq
