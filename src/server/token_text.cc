#include "server/token_text.h"

namespace tq::server {

TokenText::TokenText(const TextModel& text) : text_(text) {
  const std::vector<int32_t> ids = text.Encode("a", /*add_special=*/false);
  if (ids.empty()) return;
  const int32_t one[1] = {ids.back()};
  const std::string alone = text.Decode(one, false);
  // The anchor must decode to text ending in "a" so the split point is known.
  if (alone.empty() || alone.back() != 'a') return;
  anchor_ = ids.back();
  anchor_bytes_ = alone.size();
}

std::string TokenText::operator()(int32_t id) const {
  if (anchor_ < 0) {
    const int32_t one[1] = {id};
    return text_.Decode(one, false);
  }
  const int32_t two[2] = {anchor_, id};
  std::string s = text_.Decode(two, false);
  return s.size() >= anchor_bytes_ ? s.substr(anchor_bytes_) : std::string();
}

}  // namespace tq::server
