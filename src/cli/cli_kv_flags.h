// KV-cache compression flags shared by generate, perplexity, bench and serve (DESIGN.md §3):
//   --kv-bits B | --kv-k-bits B --kv-v-bits B   (B in 2, 2.5, 3, 3.5, 4, 8; none = plain cache)
//   --kv-sink N  --kv-window N  --kv-boundary N  --kv-scale norm|mse|unbiased  --kv-codebook
//   gaussian|sphere  --kv-center N (0 = off)  --kv-seed S (rotation signs)
//   --kv-outliers N (the paper's outlier-channel split: N channels per vector at more bits, 0 =
//   off)
//   --kv-qjl (QJL residual sketch of the keys: k bits = MSE at k-1 + 1 sign bit; k in 2..4)
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kv/kv_cache.h"

namespace tq::cli {

struct KvFlags {
  std::string bits, k_bits, v_bits;               // as typed ("3.5"); empty = not given
  int64_t sink = -1, window = -1, boundary = -1;  // -1 = not given
  int64_t center = -1;                            // -1 = not given
  int64_t seed = -1;                              // rotation-sign seed; -1 = not given
  std::string scale, codebook;                    // empty = not given
  bool qjl = false;
  int64_t outliers = -1;  // -1 = not given
};

void AddKvFlags(CLI::App& app, KvFlags* flags);
// Sets the codec fields of *opts (dtype and max_tokens are left alone). Throws tq::UsageError
// naming the flag for a bad value or combination (e.g. --kv-window without --kv-bits).
void ApplyKvFlags(const KvFlags& flags, KvCacheOptions* opts);
// "f16" for a plain cache, else e.g. "K4V3 (sink 0, window 0, boundary 0, scale mse, gaussian)"
// ("K4+qjlV3 (...)" with the QJL sketch).
std::string DescribeKvCache(const KvCacheOptions& opts);

}  // namespace tq::cli
