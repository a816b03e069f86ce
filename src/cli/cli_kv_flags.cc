#include "cli/cli_kv_flags.h"

#include <fmt/format.h>

#include <charconv>

#include "core/error.h"
#include "kv/qjl_sketch.h"
#include "kv/turboquant_codec.h"

namespace tq::cli {
namespace {

double ParseBits(const std::string& flag, const std::string& text) {
  double b = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, b);
  if (ec != std::errc() || ptr != end || !IsValidKvBits(b))
    throw UsageError(flag, "expected 2, 2.5, 3, 3.5, 4 or 8, got '" + text + "'");
  return b;
}

std::string BitsName(double b) { return fmt::format("{:g}", b); }

}  // namespace

void AddKvFlags(CLI::App& app, KvFlags* f) {
  app.add_option("--kv-bits", f->bits,
                 "compress the KV cache: bits for keys and values (2, 2.5, 3, 3.5, 4, 8)");
  app.add_option("--kv-k-bits", f->k_bits, "bits for keys (with --kv-v-bits)");
  app.add_option("--kv-v-bits", f->v_bits, "bits for values (with --kv-k-bits)");
  app.add_option("--kv-sink", f->sink, "first N positions kept fp16 (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-window", f->window, "most recent N positions kept fp16 (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-boundary", f->boundary, "first and last N layers kept fp16 (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-scale", f->scale,
                 fmt::format("per-vector scale: norm, mse or unbiased (default {})",
                             KvScaleName(KvCacheOptions{}.scale)));
  app.add_option("--kv-codebook", f->codebook,
                 fmt::format("codebook: gaussian (Lloyd-Max N(0,1)) or sphere (default {})",
                             KvCodebookName(KvCacheOptions{}.codebook)));
  app.add_option("--kv-center", f->center,
                 fmt::format("mean-center values by the mean of the first N positions, 0 = off "
                             "(default {})",
                             KvCacheOptions{}.center))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-seed", f->seed,
                 "seed of the per-layer K/V rotation signs (default: a fixed seed; results vary "
                 "slightly with it, like convert's --seed)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-outliers", f->outliers,
                 "the paper's outlier-channel split: per layer and kv head, the N channels of "
                 "largest RMS over the first block are coded by their own TurboQuant instance at "
                 "more bits and the rest at fewer, same total bits (e.g. head_dim 64, N 32: "
                 "3 = 32 at 4 + 32 at 2; 2.5 = 32 at 3 + 32 at 2); a side at 4 or 8 bits stays "
                 "unsplit; N a multiple of 32 below head_dim, 0 = off (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--kv-qjl", f->qjl,
               "QJL residual sketch of the keys (the paper's unbiased inner products): keys use "
               "k bits = MSE codes at k-1 bits + 1 sign bit per channel; k bits 2, 2.5, 3, 3.5 "
               "or 4 (default off)");
}

void ApplyKvFlags(const KvFlags& f, KvCacheOptions* o) {
  const bool both = !f.bits.empty();
  if (both && (!f.k_bits.empty() || !f.v_bits.empty()))
    throw UsageError("--kv-bits", "give either --kv-bits or --kv-k-bits/--kv-v-bits, not both");
  if (f.k_bits.empty() != f.v_bits.empty())
    throw UsageError(f.k_bits.empty() ? "--kv-k-bits" : "--kv-v-bits",
                     "--kv-k-bits and --kv-v-bits go together");
  const bool compressed = both || !f.k_bits.empty();
  auto needs_bits = [&](bool given, const char* flag) {
    if (given && !compressed)
      throw UsageError(flag, "only applies to a compressed cache: add --kv-bits B");
  };
  needs_bits(f.sink >= 0, "--kv-sink");
  needs_bits(f.window >= 0, "--kv-window");
  needs_bits(f.boundary >= 0, "--kv-boundary");
  needs_bits(!f.scale.empty(), "--kv-scale");
  needs_bits(!f.codebook.empty(), "--kv-codebook");
  needs_bits(f.center >= 0, "--kv-center");
  needs_bits(f.seed >= 0, "--kv-seed");
  needs_bits(f.qjl, "--kv-qjl");
  needs_bits(f.outliers >= 0, "--kv-outliers");
  if (!compressed) return;
  o->k_bits = both ? ParseBits("--kv-bits", f.bits) : ParseBits("--kv-k-bits", f.k_bits);
  if (f.qjl && !IsValidQjlKeyBits(o->k_bits))
    throw UsageError("--kv-qjl",
                     fmt::format("needs key bits 2, 2.5, 3, 3.5 or 4 (MSE codes at k-1 bits + 1 "
                                 "sign bit), got {}",
                                 BitsName(o->k_bits)));
  o->qjl = f.qjl;
  o->v_bits = both ? ParseBits("--kv-bits", f.bits) : ParseBits("--kv-v-bits", f.v_bits);
  if (f.outliers >= 0) {
    if (f.outliers % 32 != 0)
      throw UsageError("--kv-outliers",
                       fmt::format("N must be 0 (off) or a multiple of 32 (codes pack in units of "
                                   "32 channels), got {}",
                                   f.outliers));
    const double kb = o->k_bits - (o->qjl ? 1 : 0);
    if (f.outliers > 0 && kb >= 4 && o->v_bits >= 4)
      throw UsageError("--kv-outliers",
                       fmt::format("no exact split of K {} / V {} bits (outliers at most 4 bits, "
                                   "so only widths below 4 split)",
                                   BitsName(o->k_bits), BitsName(o->v_bits)));
    o->outliers = f.outliers;
  }
  if (f.sink >= 0) o->sink = f.sink;
  if (f.window >= 0) o->window = f.window;
  if (f.boundary >= 0) o->boundary = f.boundary;
  if (f.center >= 0) o->center = f.center;
  if (f.seed >= 0) o->seed = uint64_t(f.seed);
  if (!f.scale.empty()) {
    const auto s = ParseKvScale(f.scale);
    if (!s) throw UsageError("--kv-scale", "expected norm, mse or unbiased, got '" + f.scale + "'");
    o->scale = *s;
  }
  if (!f.codebook.empty()) {
    const auto c = ParseKvCodebook(f.codebook);
    if (!c)
      throw UsageError("--kv-codebook", "expected gaussian or sphere, got '" + f.codebook + "'");
    o->codebook = *c;
  }
}

std::string DescribeKvCache(const KvCacheOptions& o) {
  if (!o.compressed()) return std::string(KvDTypeName(o.dtype));
  return fmt::format("K{}{}V{} (sink {}, window {}, boundary {}, scale {}, {}, center {}{})",
                     BitsName(o.k_bits), o.qjl ? "+qjl" : "", BitsName(o.v_bits), o.sink, o.window,
                     o.boundary, KvScaleName(o.scale), KvCodebookName(o.codebook), o.center,
                     o.outliers > 0 ? fmt::format(", outliers {}", o.outliers) : "");
}

}  // namespace tq::cli
