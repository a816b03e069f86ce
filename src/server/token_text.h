// The text one token adds in the middle of a text. Decoding a token alone is not that: a
// SentencePiece-style decoder strips the space of a leading "▁" at the start of a text, so
// "▁Paris" alone decodes to "Paris". Decoding it after an anchor token ("a") and dropping the
// anchor's text gives " Paris", what the token really appends. Used for the grammar vocabulary
// and for logprobs' token strings.
#pragma once

#include <cstdint>
#include <string>

#include "server/text_model.h"

namespace tq::server {

class TokenText {
 public:
  explicit TokenText(const TextModel& text);
  // Special tokens keep their text ("<tool_call>").
  std::string operator()(int32_t id) const;

 private:
  const TextModel& text_;
  int32_t anchor_ = -1;      // a token decoding to plain text ("a"); -1: decode alone
  size_t anchor_bytes_ = 0;  // its text's length when decoded first
};

}  // namespace tq::server
