// `turboquant synth`: writes a random-weight bf16 (or, with bits, TurboQuant packed) checkpoint
// with the exact shapes of a real model (runtime/synth_shapes.h), for speed and memory work without
// downloading weights. Streaming: one tensor chunk in memory at a time. Atomic: a temp directory
// renamed at the end.
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
  // 0: bf16 weights. 2, 3, 4 or 8: a TurboQuant checkpoint as `convert --bits N` would lay it out
  // (its recipe: which tensors, groups, rotation groups), written directly with random codes,
  // fp16 group scales giving each weight the bf16 tensor's standard deviation, the Gaussian
  // codebook and random sign vectors: no bf16 intermediate on disk or in memory.
  int bits = 0;
  // With bits: the embedding / LM head (16 = bf16 as stored, or 8 / 4) and the linears' group size
  // (0 = the recipe's default). `turboquant synth` passes convert's defaults (convert/defaults.h:
  // 8-bit embedding, group 128 at 4 and 8 bits) so that its files read the bytes a converted file
  // reads a token.
  int embed_bits = 16;
  int group_size = 0;
};

struct SynthResult {
  uint64_t total_bytes = 0;  // tensor bytes
  int64_t num_tensors = 0;
  int64_t num_shards = 0;
};

SynthResult WriteSynthCheckpoint(const SynthOptions& opts);

}  // namespace tq
