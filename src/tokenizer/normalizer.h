// Normalizers (tokenizer.json "normalizer"): rewrite one piece of text before pre-tokenization.
// Each runs on one piece between added tokens, as `tokenizers` runs them.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_util.h"

namespace tq::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `s` (valid UTF-8) in place.
  virtual void Normalize(std::string& s) const = 0;
};

// Builds a normalizer from its JSON object. Types: NFC, NFD, NFKC, NFKD, Lowercase, Uppercase,
// Strip, StripAccents, Prepend, Append, Replace, ByteLevel, Sequence. Others -> tq::Error.
std::unique_ptr<Normalizer> MakeNormalizer(const Json& j, const std::string& where);

}  // namespace tq::tok
