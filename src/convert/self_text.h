// Text a model writes itself (issue 18: still no external data): the token sequences that
// `--sensitivity-text self` measures α on and `--self-calibrate` records input moments from.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/rng.h"

namespace tq {

class Model;

// Replaces s[1..] by the model's own continuation of s[0], sampled token by token at
// `temperature` (> 0: softmax(logits / temperature), drawn with rng.Uniform()). Deterministic for
// the rng's state. Runs s.size() − 1 one-token forward passes on a cache of s.size() tokens.
void SampleContinuation(Model& model, std::vector<int32_t>& s, double temperature,
                        quant::SplitMix64& rng);

// The same for several sequences of one length at once (sequence k at temperatures[k % size]):
// each step is one DecodeBatch pass over the weights for all of them, and draws the next token
// of sequence 0, 1, ... in that order from the one rng. (One sequence is exactly
// SampleContinuation.)
void SampleContinuations(Model& model, std::vector<std::vector<int32_t>>& seqs,
                         std::span<const double> temperatures, quant::SplitMix64& rng);

}  // namespace tq
