#include "runtime/detokenizer.h"

namespace tq {

bool IsCompleteUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len;
    if (c < 0x80) {
      len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t j = 1; j < len; ++j) {
      if ((p[i + j] & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  // U+FFFD is EF BF BD.
  return !(n >= 3 && p[n - 3] == 0xEF && p[n - 2] == 0xBF && p[n - 1] == 0xBD);
}

IncrementalDetokenizer::IncrementalDetokenizer(DecodeFn decode) : decode_(std::move(decode)) {}

void IncrementalDetokenizer::Reset(std::span<const int32_t> context) {
  ids_.assign(context.begin(), context.end());
  prefix_ = 0;
  read_ = ids_.size();
  out_.clear();
}

std::string_view IncrementalDetokenizer::Push(int32_t token) {
  out_.clear();
  ids_.push_back(token);
  const std::span<const int32_t> all(ids_);
  const std::string prefix_text = decode_(all.subspan(prefix_, read_ - prefix_));
  std::string text = decode_(all.subspan(prefix_));
  if (text.size() <= prefix_text.size()) return out_;  // e.g. a lone byte token so far
  std::string_view added = std::string_view(text).substr(prefix_text.size());
  if (!IsCompleteUtf8(added)) return out_;
  out_.assign(added);
  prefix_ = read_;
  read_ = ids_.size();
  // Keep the window short: tokens before prefix_ are never decoded again.
  if (prefix_ > 64) {
    ids_.erase(ids_.begin(), ids_.begin() + std::ptrdiff_t(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  return out_;
}

std::string_view IncrementalDetokenizer::Flush() {
  out_.clear();
  if (read_ < ids_.size()) {
    const std::span<const int32_t> all(ids_);
    const std::string prefix_text = decode_(all.subspan(prefix_, read_ - prefix_));
    const std::string text = decode_(all.subspan(prefix_));
    if (text.size() > prefix_text.size()) out_.assign(text, prefix_text.size());
    prefix_ = read_ = ids_.size();
  }
  return out_;
}

}  // namespace tq
