// `turboquant synth`: writes a random-weight bf16 Hugging Face checkpoint with the exact shapes of
// a real model (runtime/synth_shapes.h), for speed and memory work without downloading weights.
// Streaming: one tensor chunk in memory at a time. Atomic: a temp directory renamed at the end.
#pragma once

#include <cstdint>
#include <string>

namespace tq {

struct SynthOptions {
  std::string like;     // a SynthShapes() name
  std::string out_dir;  // must not exist (or be empty)
  int64_t layers = 0;   // 0 = all of the model's layers
  uint64_t seed = 0;
  uint64_t shard_bytes = uint64_t(2) << 30;  // shard above this size (with an index)
  bool progress = true;                      // a progress bar on stderr
};

struct SynthResult {
  uint64_t total_bytes = 0;  // tensor bytes
  int64_t num_tensors = 0;
  int64_t num_shards = 0;
};

SynthResult WriteSynthCheckpoint(const SynthOptions& opts);

}  // namespace tq
