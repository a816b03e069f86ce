// Streaming detokenization. Decoding tokens one at a time is wrong twice over: a multi-byte
// character may be split across byte tokens (byte-level BPE, SentencePiece byte fallback), and
// decoders that strip or add a leading space (Metaspace, Strip) treat the first token of a
// decode specially. So we decode a short window of recent tokens, from a prefix offset, and emit
// only the text past what the prefix alone decoded to, and only once it ends in complete UTF-8.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tq {

// Decodes ids to text (e.g. Tokenizer::Decode with skip_special_tokens bound).
using DecodeFn = std::function<std::string(std::span<const int32_t> ids)>;

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(DecodeFn decode);

  // Starts a new stream. `context` (typically the last few prompt tokens) is decoded but never
  // emitted: it puts the first generated token in the right position for leading-space rules.
  void Reset(std::span<const int32_t> context = {});
  // Adds a token; returns the newly completed text (often empty while a character is partial).
  std::string_view Push(int32_t token);
  // End of stream: returns whatever is still held (possibly with U+FFFD for broken bytes).
  std::string_view Flush();

 private:
  DecodeFn decode_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // ids_[prefix_, read_) were decoded and emitted; the anchor for spaces
  size_t read_ = 0;    // ids_[read_, end) are not emitted yet
  std::string out_;
};

// True when `s` is valid UTF-8 and does not end in U+FFFD (a decoder's mark for bytes that do
// not form a character yet).
bool IsCompleteUtf8(std::string_view s);

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view s);

// Number of context tokens worth keeping before the first generated token.
constexpr size_t kDetokenizerContext = 4;
// Tokens held back at most while waiting for a character to complete.
constexpr size_t kMaxHeldTokens = 8;

}  // namespace tq
