// A PCRE2 regex (UTF + UCP, JIT-compiled) iterated the way `tokenizers` iterates its Oniguruma
// regexes, and the `Pattern` of tokenizer.json ({"String": ...} or {"Regex": ...}).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"

namespace tq::tok {

// A byte range of the text and whether the pattern matched it. FindMatches() results cover the
// whole text in order, alternating runs of matches and gaps (`tokenizers`' Pattern::find_matches).
struct Match {
  size_t begin = 0;
  size_t end = 0;
  bool is_match = false;
};

class Regex {
 public:
  // Throws tq::Error naming `where` when `pattern` does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends [begin, end) of successive non-overlapping matches. An empty match right where the
  // previous match ended is skipped (Oniguruma's find_iter rule). `text` must be valid UTF-8.
  void FindAll(std::string_view text, std::vector<Match>& out) const;
  // The first match at or after `start`; false when none.
  bool Find(std::string_view text, size_t start, size_t* begin, size_t* end) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Escapes every regex metacharacter so `s` matches literally.
std::string RegexEscape(std::string_view s);

// tokenizer.json `pattern`: a literal string or a regex.
class Pattern {
 public:
  static Pattern Literal(std::string s);
  static Pattern FromRegex(const std::string& re, const std::string& where);

  // The text split into matches and gaps (covering it fully); an empty text gives one empty gap.
  void FindMatches(std::string_view text, std::vector<Match>& out) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

// Replaces every match of `pattern` in `s` by `content` (taken literally, no $1 references).
void ReplaceAll(const Pattern& pattern, const std::string& content, std::string& s);

// {"String": "..."} or {"Regex": "..."}.
Pattern MakePattern(const Json& j, const std::string& where);

}  // namespace tq::tok
