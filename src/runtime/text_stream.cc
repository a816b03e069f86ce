#include "runtime/text_stream.h"

#include <algorithm>

namespace tq {

TextStream::TextStream(DecodeFn decode, std::vector<std::string> stop,
                       std::span<const int32_t> prompt)
    : detok_(std::move(decode)), stops_(std::move(stop)) {
  const size_t ctx = std::min(prompt.size(), kDetokenizerContext);
  detok_.Reset(prompt.subspan(prompt.size() - ctx));
}

bool TextStream::Finish(std::string* out) {
  if (stops_.stopped()) return false;
  const auto r = stops_.Push(detok_.Flush());
  out->append(r.text);
  if (r.stopped) return true;
  out->append(stops_.Flush());
  return false;
}

}  // namespace tq
