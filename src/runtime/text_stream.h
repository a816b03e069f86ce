// Generated tokens -> the text a reader may see: streaming detokenization (anchored on the
// prompt's last tokens, for leading-space rules) followed by stop strings. One piece of code for
// the CLI's Sequence and the server's per-choice sinks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/detokenizer.h"
#include "runtime/stop_strings.h"

namespace tq {

class TextStream {
 public:
  TextStream(DecodeFn decode, std::vector<std::string> stop, std::span<const int32_t> prompt);

  // The text that may be shown after `token` (valid until the next call); `stopped` when a stop
  // string completed (the text then ends just before it, and later pushes return nothing).
  StopStringMatcher::Result Push(int32_t token) { return stops_.Push(detok_.Push(token)); }
  // The end of the generation: appends the held-back text to *out. Returns true when a stop
  // string completes in that text (false, appending nothing, once stopped already).
  bool Finish(std::string* out);

  bool stopped() const { return stops_.stopped(); }

 private:
  IncrementalDetokenizer detok_;
  StopStringMatcher stops_;
};

}  // namespace tq
