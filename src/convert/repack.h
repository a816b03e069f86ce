// `turboquant convert --repack`: a turboquant-mlx checkpoint directory (io/tqmlx_import.h) ->
// the native TurboQuant checkpoint it imports as, written out as it is (no re-quantization:
// the same codes, scales, codebooks and signs, so the logits are identical to running the
// source as loaded). Written into "<out>.tmp-convert-<pid>" and renamed at the end, like
// convert; shards above `shard_bytes` with the Hugging Face index.
#pragma once

#include <cstdint>
#include <string>

namespace tq {

struct RepackOptions {
  std::string model_dir;  // a turboquant-mlx checkpoint
  std::string out_dir;
  bool force = false;  // replace an existing out_dir
  uint64_t shard_bytes = uint64_t(2) << 30;
};

struct RepackSummary {
  int64_t tensors = 0;
  int64_t linears = 0;  // quantized linears (quantization.tensors)
  int64_t bytes = 0;
  int64_t num_shards = 0;
  double seconds = 0;
};

// Throws tq::UsageError for an existing out_dir without force or a source that is not a
// turboquant-mlx checkpoint, tq::Error for bad input; out_dir is untouched on failure.
RepackSummary Repack(const RepackOptions& opts);

}  // namespace tq
