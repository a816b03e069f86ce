// Decoders (tokenizer.json "decoder"): turn the token strings of some ids back into text. Each
// rewrites the list of token strings (`tokenizers`' decode_chain); the result is their
// concatenation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tq::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
};

// Types: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPEDecoder, Sequence.
// Others -> tq::Error.
std::unique_ptr<Decoder> MakeDecoder(const Json& j, const std::string& where);

}  // namespace tq::tok
