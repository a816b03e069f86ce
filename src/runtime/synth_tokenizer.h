// A tokenizer for synthetic checkpoints: byte-level BPE (the 256 GPT-2 byte symbols, then
// synthetic merges until the vocabulary is full) plus the special tokens and chat template of the
// model family. It is not a trained tokenizer; it only has to load, round-trip text and have the
// real vocabulary size so embedding and LM-head shapes are exact.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/synth_shapes.h"

namespace tq {

struct SynthTokenizerFiles {
  nlohmann::json tokenizer;          // tokenizer.json
  nlohmann::json tokenizer_config;   // tokenizer_config.json
  nlohmann::json generation_config;  // generation_config.json
};

// `vocab` tokens in all (ids [0, vocab)); needs vocab >= 256 + the style's special tokens.
SynthTokenizerFiles MakeSynthTokenizer(SynthTokenizerStyle style, int64_t vocab);

}  // namespace tq
