#include "tokenizer/added_tokens.h"

#include <cstring>

#include "tokenizer/unicode.h"

namespace tq::tok {

namespace {

bool EndsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t b;
  return IsWordChar(PrevChar(s, s.size(), &b));
}

bool StartsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return IsWordChar(NextChar(s, i));
}

// Start of the run of whitespace that ends `s` (s.size() when none).
size_t TrailingSpaceStart(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t b;
    if (!IsWhitespace(PrevChar(s, e, &b))) break;
    e = b;
  }
  return e;
}

// Length of the run of whitespace that starts `s`.
size_t LeadingSpaceLen(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!IsWhitespace(NextChar(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& patterns) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    const int32_t index = int32_t(tokens_.size());
    tokens_.push_back(tokens[t]);
    int32_t node = 0;
    for (char ch : p) {
      const uint8_t c = uint8_t(ch);
      int32_t child = -1;
      for (const auto& [byte, n] : nodes_[node].next) {
        if (byte == c) child = n;
      }
      if (child < 0) {
        child = int32_t(nodes_.size());
        nodes_[node].next.emplace_back(c, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // Two tokens with one pattern: the first one added wins.
    if (nodes_[node].token < 0) nodes_[node].token = index;
    first_byte_[uint8_t(p[0])] = true;
  }
}

int32_t AddedTokenMatcher::LongestAt(std::string_view text, size_t pos, size_t* len) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const uint8_t c = uint8_t(text[i]);
    int32_t child = -1;
    for (const auto& [byte, n] : nodes_[node].next) {
      if (byte == c) {
        child = n;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<Segment>& out) const {
  if (text.empty()) return;
  size_t done = 0;  // end of the last emitted segment
  size_t pos = 0;   // where the match scan resumes
  while (pos < text.size()) {
    if (!first_byte_[uint8_t(text[pos])]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    const int32_t t = LongestAt(text, pos, &len);
    if (t < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    if (start < done) continue;  // inside whitespace an earlier rstrip token took
    const AddedToken& tok = tokens_[t];
    if (tok.single_word) {
      const bool space_before = start == 0 || !EndsWithWord(text.substr(0, start));
      const bool space_after = stop == text.size() || !StartsWithWord(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (tok.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), done);
    if (tok.rstrip) stop += LeadingSpaceLen(text.substr(stop));
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, tok.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
}

}  // namespace tq::tok
