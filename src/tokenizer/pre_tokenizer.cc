#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <functional>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace tq::tok {

void ApplyBehavior(const std::vector<Match>& matches, SplitBehavior behavior,
                   std::vector<Match>& out) {
  out.clear();
  switch (behavior) {
    case SplitBehavior::kIsolated:
      out = matches;
      break;
    case SplitBehavior::kRemoved:
      for (const Match& m : matches) {
        if (!m.is_match) out.push_back(m);
      }
      break;
    case SplitBehavior::kContiguous: {
      bool prev = false;
      for (const Match& m : matches) {
        if (m.is_match == prev && !out.empty()) {
          out.back().end = m.end;
        } else {
          out.push_back(m);
        }
        prev = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev = false;
      for (const Match& m : matches) {
        if (m.is_match && !prev && !out.empty()) {
          out.back().end = m.end;
        } else {
          out.push_back(m);
        }
        prev = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev = false;
      for (size_t i = matches.size(); i-- > 0;) {
        const Match& m = matches[i];
        if (m.is_match && !prev && !out.empty()) {
          out.back().begin = m.begin;
        } else {
          out.push_back(m);
        }
        prev = m.is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
}

namespace {

// Every character satisfying `pred` is its own match (`tokenizers`' Pattern for Fn(char)).
void CharMatches(std::string_view text, const std::function<bool(char32_t)>& pred,
                 std::vector<Match>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0, i = 0;
  while (i < text.size()) {
    const size_t b = i;
    const char32_t c = NextChar(text, i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

// Splits every piece along `ranges_of(piece)`, keeping non-empty sub-pieces.
template <typename RangesFn>
void SplitEach(std::vector<Piece>& pieces, RangesFn&& ranges_of) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  thread_local std::vector<Match> ranges;
  for (Piece& p : pieces) {
    ranges.clear();
    ranges_of(p, ranges);
    if (ranges.size() == 1 && ranges[0].begin == 0 && ranges[0].end == p.text.size()) {
      if (!p.text.empty()) out.push_back(std::move(p));
      continue;
    }
    for (const Match& r : ranges) {
      if (r.end <= r.begin) continue;
      out.push_back({p.text.substr(r.begin, r.end - r.begin), p.at_start && r.begin == 0});
    }
  }
  pieces.swap(out);
}

SplitBehavior ParseBehavior(const Json& j, const char* key, SplitBehavior fallback,
                            const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  const std::string b = GetString(j, key, where);
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  Fail(where, "unknown split behavior '{}'", b);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    thread_local std::vector<Match> matches;
    SplitEach(pieces, [&](const Piece& p, std::vector<Match>& ranges) {
      pattern_.FindMatches(p.text, matches);
      if (invert_) {
        for (Match& m : matches) m.is_match = !m.is_match;
      }
      ApplyBehavior(matches, behavior_, ranges);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits on characters satisfying a predicate.
class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    thread_local std::vector<Match> matches;
    SplitEach(pieces, [&](const Piece& p, std::vector<Match>& ranges) {
      CharMatches(p.text, pred_, matches);
      ApplyBehavior(matches, behavior_, ranges);
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) split_ = Pattern::FromRegex(kGpt2Regex, where);
    use_regex_ = use_regex;
  }
  void PreTokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (!p.text.empty() && p.text[0] != ' ') p.text.insert(0, 1, ' ');
      }
    }
    if (use_regex_) {
      SplitEach(pieces, [&](const Piece& p, std::vector<Match>& ranges) {
        split_.FindMatches(p.text, ranges);
      });
    }
    std::string mapped;
    for (Piece& p : pieces) {
      mapped.clear();
      ByteLevelEncode(p.text, mapped);
      p.text.swap(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  bool use_regex_ = false;
  Pattern split_;
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum Scheme { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(char32_t replacement, Scheme scheme, bool split)
      : scheme_(scheme), split_(split) {
    AppendUtf8(rep_, replacement);
    replacement_ = replacement;
  }
  void PreTokenize(std::vector<Piece>& pieces) const override {
    std::string buf;
    for (Piece& p : pieces) {
      buf.clear();
      for (char c : p.text) {
        if (c == ' ') {
          buf.append(rep_);
        } else {
          buf.push_back(c);
        }
      }
      const bool starts = buf.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == kAlways || (scheme_ == kFirst && p.at_start))) {
        buf.insert(0, rep_);
      }
      p.text.swap(buf);
    }
    if (!split_) return;
    thread_local std::vector<Match> matches;
    const char32_t rep = replacement_;
    SplitEach(pieces, [&](const Piece& p, std::vector<Match>& ranges) {
      CharMatches(
          p.text, [rep](char32_t c) { return c == rep; }, matches);
      ApplyBehavior(matches, SplitBehavior::kMergedWithNext, ranges);
    });
  }

 private:
  std::string rep_;
  char32_t replacement_;
  Scheme scheme_;
  bool split_;
};

// Keeps the runs of `\w+|[^\w\s]+` (Rust regex classes), dropping whitespace.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void PreTokenize(std::vector<Piece>& pieces) const override {
    SplitEach(pieces, [&](const Piece& p, std::vector<Match>& ranges) {
      // 0 = whitespace, 1 = word, 2 = other.
      std::string_view s = p.text;
      size_t i = 0;
      int run = 0;
      while (i < s.size()) {
        const size_t b = i;
        const char32_t c = NextChar(s, i);
        const int cls = IsWordChar(c) ? 1 : IsWhitespace(c) ? 0 : 2;
        if (cls != 0 && cls == run) {
          ranges.back().end = i;
        } else if (cls != 0) {
          ranges.push_back({b, i, true});
        }
        run = cls;
      }
    });
  }
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->PreTokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> MakePreTokenizer(const Json& j, const std::string& where) {
  NestingGuard guard(where);
  const std::string type = TypeOf(j, where);
  const std::string w = where + ": pre_tokenizer " + type;
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        MakePattern(Field(j, "pattern", w), w),
        ParseBehavior(j, "behavior", SplitBehavior::kRemoved, w), GetBoolOr(j, "invert", false, w));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(GetBoolOr(j, "add_prefix_space", true, w),
                                                   GetBoolOr(j, "use_regex", true, w), w);
  }
  if (type == "Metaspace") {
    const char32_t rep = GetChar(j, "replacement", w);
    MetaspacePreTokenizer::Scheme scheme;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      const std::string s = GetString(j, "prepend_scheme", w);
      if (s == "always") {
        scheme = MetaspacePreTokenizer::kAlways;
      } else if (s == "first") {
        scheme = MetaspacePreTokenizer::kFirst;
      } else if (s == "never") {
        scheme = MetaspacePreTokenizer::kNever;
      } else {
        Fail(w, "unknown prepend_scheme '{}'", s);
      }
    } else {
      scheme = GetBoolOr(j, "add_prefix_space", true, w) ? MetaspacePreTokenizer::kAlways
                                                         : MetaspacePreTokenizer::kNever;
    }
    return std::make_unique<MetaspacePreTokenizer>(rep, scheme, GetBoolOr(j, "split", true, w));
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(IsWhitespace, SplitBehavior::kRemoved);
  }
  if (type == "CharDelimiterSplit") {
    const char32_t d = GetChar(j, "delimiter", w);
    return std::make_unique<CharSplitPreTokenizer>([d](char32_t c) { return c == d; },
                                                   SplitBehavior::kRemoved);
  }
  if (type == "Digits") {
    return std::make_unique<CharSplitPreTokenizer>(
        IsNumeric, GetBoolOr(j, "individual_digits", false, w) ? SplitBehavior::kIsolated
                                                               : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation") {
    return std::make_unique<CharSplitPreTokenizer>(
        IsPunctuation, ParseBehavior(j, "behavior", SplitBehavior::kIsolated, w));
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(std::make_unique<CharSplitPreTokenizer>(IsWhitespace, SplitBehavior::kRemoved));
    parts.push_back(
        std::make_unique<CharSplitPreTokenizer>(IsPunctuation, SplitBehavior::kIsolated));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const Json& e : GetArray(j, "pretokenizers", w)) {
      parts.push_back(MakePreTokenizer(e, where));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  Fail(where, "unsupported pre_tokenizer type '{}'", type);
}

}  // namespace tq::tok
