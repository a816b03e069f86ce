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

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    const size_t len = c < 0x80             ? 1
                       : (c & 0xE0) == 0xC0 ? 2
                       : (c & 0xF0) == 0xE0 ? 3
                       : (c & 0xF8) == 0xF0 ? 4
                                            : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) ok = (p[i + j] & 0xC0) == 0x80;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += 1;
    }
  }
  return out;
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
  if (!IsCompleteUtf8(added)) {
    // A character needs at most 4 byte tokens: beyond that the bytes are simply invalid (a
    // decoder that returns raw bytes), so release them as U+FFFD rather than hold forever.
    if (ids_.size() - read_ <= kMaxHeldTokens) return out_;
    out_ = SanitizeUtf8(added);
  } else {
    out_.assign(added);
  }
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
    if (text.size() > prefix_text.size()) {
      out_ = SanitizeUtf8(std::string_view(text).substr(prefix_text.size()));
    }
    prefix_ = read_ = ids_.size();
  }
  return out_;
}

}  // namespace tq
