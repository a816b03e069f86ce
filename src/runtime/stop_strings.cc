#include "runtime/stop_strings.h"

#include <algorithm>

namespace tq {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (s.empty()) continue;
    max_len_ = std::max(max_len_, s.size());
    stops_.push_back(std::move(s));
  }
  pending_.reserve(max_len_ * 2);
}

StopStringMatcher::Result StopStringMatcher::Push(std::string_view piece) {
  out_.clear();
  if (stopped_) return {out_, true};
  if (stops_.empty()) {
    out_.assign(piece);
    return {out_, false};
  }
  pending_.append(piece);
  // The earliest complete stop string. pending_ held no complete one before this piece, so a
  // match must end inside the new piece; searching the whole (short) buffer is simplest.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    out_.assign(pending_, 0, first);
    pending_.clear();
    stopped_ = true;
    return {out_, true};
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  const size_t limit = std::min(pending_.size(), max_len_ - 1);
  for (size_t len = limit; len > 0 && hold == 0; --len) {
    const std::string_view tail = std::string_view(pending_).substr(pending_.size() - len);
    for (const auto& s : stops_) {
      if (s.size() > len && std::string_view(s).substr(0, len) == tail) {
        hold = len;
        break;
      }
    }
  }
  out_.assign(pending_, 0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return {out_, false};
}

std::string_view StopStringMatcher::Flush() {
  out_.clear();
  if (!stopped_) out_.swap(pending_);
  pending_.clear();
  return out_;
}

}  // namespace tq
