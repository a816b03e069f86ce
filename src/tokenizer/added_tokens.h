// Added tokens (tokenizer.json "added_tokens"): strings matched in the text before the model runs
// and mapped straight to their id. `tokenizers` matches them leftmost-longest; single_word keeps
// a match only between non-word characters; lstrip/rstrip swallow the whitespace beside it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tq::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched in normalized text (else in the raw input)
  bool special = false;
};

// A piece of text, either plain (id < 0) or one added token (id >= 0).
struct Segment {
  size_t begin = 0;
  size_t end = 0;
  int32_t id = -1;
};

// Matches a set of added tokens (`tokenizers`' AddedVocabulary::find_matches).
class AddedTokenMatcher {
 public:
  // `patterns[i]` is the string to find for `tokens[i]` (its content, normalized for a
  // normalized token). Empty patterns are ignored.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                    const std::vector<std::string>& patterns);
  bool empty() const { return tokens_.empty(); }

  // Appends the segments of `text`, which cover it in order (nothing for an empty text).
  void Split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // byte -> child node
    int32_t token = -1;                             // index into tokens_ when a pattern ends here
  };
  // The longest pattern starting at text[pos]: its token index and length, or -1.
  int32_t LongestAt(std::string_view text, size_t pos, size_t* len) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace tq::tok
