#include "tokenizer/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja/text.h"
#include "tokenizer/jinja/value.h"

namespace tq::jinja {

std::string NormalizeNewlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    const auto c = static_cast<unsigned char>(source[i]);
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else if (c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E) {
      out.push_back('\n');
    } else if (c == 0xC2 && i + 1 < source.size() &&
               static_cast<unsigned char>(source[i + 1]) == 0x85) {
      out.push_back('\n');
      ++i;
    } else if (c == 0xE2 && i + 2 < source.size() &&
               static_cast<unsigned char>(source[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(source[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(source[i + 2]) == 0xA9)) {
      out.push_back('\n');
      i += 2;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python str.rstrip() (Unicode whitespace).
std::string RStripPy(const std::string& s) { return PyStrip(s, nullptr, false, true); }

bool AllPySpace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : DecodeUtf8(s))
    if (!IsPySpace(c)) return false;
  return true;
}

class Lexer {
 public:
  Lexer(const std::string& s, const LexOptions& o) : s_(s), o_(o) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> Run() {
    while (pos_ < s_.size()) {
      const size_t start = FindTagStart(pos_);
      if (start == std::string::npos) {
        Emit(Tok::kData, pos_, s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      const char kind = s_[start + 1];  // '{', '%' or '#'
      char sign = 0;
      if (start + 2 < s_.size() && (s_[start + 2] == '-' || s_[start + 2] == '+'))
        sign = s_[start + 2];
      size_t raw_end = 0;
      const bool raw = kind == '%' && MatchRawBegin(start, &raw_end);
      std::string text = s_.substr(pos_, start - pos_);
      if (sign == '-') {
        text = RStripPy(text);
      } else if (sign != '+' && o_.lstrip_blocks && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && AllPySpace(std::string_view(text).substr(l_pos)))
          text.resize(l_pos);
      }
      if (!text.empty()) Emit(Tok::kData, pos_, std::move(text));
      line_starting_ = false;
      if (raw) {
        LexRaw(start, raw_end);
        continue;
      }
      const size_t body = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        LexComment(start, body);
      } else {
        Emit(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, start, "");
        pos_ = body;
        LexTag(kind == '%');
      }
    }
    Emit(Tok::kEof, s_.size(), "");
    return std::move(out_);
  }

 private:
  [[noreturn]] void Fail(size_t at, const std::string& msg) {
    RenderError e{msg};
    Position(at, &e.line, &e.col);
    throw e;
  }

  void Position(size_t at, int* line, int* col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    *line = static_cast<int>(idx + 1);
    *col = static_cast<int>(at - line_starts_[idx] + 1);
  }

  Token& Emit(Tok type, size_t at, std::string text) {
    Token t{type, std::move(text)};
    Position(at, &t.line, &t.col);
    out_.push_back(std::move(t));
    return out_.back();
  }

  size_t FindTagStart(size_t from) const {
    size_t p = from;
    while ((p = s_.find('{', p)) != std::string::npos) {
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
      ++p;
    }
    return std::string::npos;
  }

  size_t SkipSpaces(size_t p) const {
    while (p < s_.size() && IsAsciiSpace(s_[p])) ++p;
    return p;
  }

  bool StartsWith(size_t p, const char* lit) const {
    return s_.compare(p, std::strlen(lit), lit) == 0;
  }

  // `{%[-+]?\s*raw\s*(-%}\s*|%})`
  bool MatchRawBegin(size_t start, size_t* end) const {
    size_t p = start + 2;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    p = SkipSpaces(p);
    if (!StartsWith(p, "raw")) return false;
    p = SkipSpaces(p + 3);
    if (StartsWith(p, "-%}")) {
      *end = SkipSpaces(p + 3);
      return true;
    }
    if (StartsWith(p, "%}")) {
      *end = p + 2;
      return true;
    }
    return false;
  }

  void LexRaw(size_t start, size_t body) {
    line_starting_ = body > 0 && s_[body - 1] == '\n';
    size_t p = body;
    while ((p = s_.find("{%", p)) != std::string::npos) {
      size_t q = p + 2;
      char sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      q = SkipSpaces(q);
      if (!StartsWith(q, "endraw")) {
        ++p;
        continue;
      }
      q = SkipSpaces(q + 6);
      size_t end;
      if (StartsWith(q, "+%}")) {
        end = q + 3;
      } else if (StartsWith(q, "-%}")) {
        end = SkipSpaces(q + 3);
      } else if (StartsWith(q, "%}")) {
        end = q + 2;
        if (o_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
      } else {
        ++p;
        continue;
      }
      std::string text = s_.substr(body, p - body);
      if (sign == '-') {
        text = RStripPy(text);
      } else if (sign != '+' && o_.lstrip_blocks) {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && AllPySpace(std::string_view(text).substr(l_pos)))
          text.resize(l_pos);
      }
      if (!text.empty()) Emit(Tok::kData, body, std::move(text));
      pos_ = end;
      line_starting_ = end > 0 && s_[end - 1] == '\n';
      return;
    }
    Fail(start, "missing end of raw directive");
  }

  void LexComment(size_t start, size_t body) {
    const size_t f = s_.find("#}", body);
    if (f == std::string::npos) Fail(start, "missing end of comment tag");
    size_t end = f + 2;
    if (f > body && s_[f - 1] == '-') {
      end = SkipSpaces(end);
    } else if (o_.trim_blocks && end < s_.size() && s_[end] == '\n') {
      ++end;
    }
    pos_ = end;
    line_starting_ = s_[end - 1] == '\n';
  }

  void LexTag(bool block) {
    std::vector<char> brackets;
    const size_t tag_start = pos_;
    while (true) {
      if (pos_ >= s_.size())
        Fail(tag_start, block ? "unexpected end of template, expected end of statement block"
                              : "unexpected end of template, expected end of print statement");
      if (brackets.empty() && TryTagEnd(block)) return;
      const char c = s_[pos_];
      if (IsAsciiSpace(c)) {
        ++pos_;
      } else if (IsDigit(c)) {
        LexNumber();
      } else if (IsNameStart(c)) {
        size_t e = pos_;
        while (e < s_.size() && IsNameChar(s_[e])) ++e;
        Emit(Tok::kName, pos_, s_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        LexString();
      } else {
        LexOperator(brackets);
      }
    }
  }

  bool TryTagEnd(bool block) {
    const size_t at = pos_;
    size_t end;
    if (block) {
      if (StartsWith(pos_, "+%}")) {
        end = pos_ + 3;
      } else if (StartsWith(pos_, "-%}")) {
        end = SkipSpaces(pos_ + 3);
      } else if (StartsWith(pos_, "%}")) {
        end = pos_ + 2;
        if (o_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
      } else {
        return false;
      }
    } else {
      if (StartsWith(pos_, "-}}")) {
        end = SkipSpaces(pos_ + 3);
      } else if (StartsWith(pos_, "}}")) {
        end = pos_ + 2;
      } else {
        return false;
      }
    }
    Emit(block ? Tok::kBlockEnd : Tok::kVarEnd, at, "");
    pos_ = end;
    line_starting_ = s_[end - 1] == '\n';
    return true;
  }

  // `(\d+_)*\d+`: returns the end, or npos when no digit at p.
  size_t Digits(size_t p) const {
    if (p >= s_.size() || !IsDigit(s_[p])) return std::string::npos;
    while (true) {
      while (p < s_.size() && IsDigit(s_[p])) ++p;
      if (p + 1 < s_.size() && s_[p] == '_' && IsDigit(s_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  size_t Exponent(size_t p) const {  // at [eE]
    if (p >= s_.size() || (s_[p] != 'e' && s_[p] != 'E')) return std::string::npos;
    ++p;
    if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
    return Digits(p);
  }

  void LexNumber() {
    const size_t a = Digits(pos_);
    size_t fend = std::string::npos;
    const bool after_dot = pos_ > 0 && s_[pos_ - 1] == '.';
    if (!after_dot) {
      if (a < s_.size() && s_[a] == '.') {
        const size_t b = Digits(a + 1);
        if (b != std::string::npos) {
          const size_t c = Exponent(b);
          fend = c != std::string::npos ? c : b;
        }
      }
      if (fend == std::string::npos) fend = Exponent(a);
    }
    if (fend != std::string::npos) {
      std::string text;
      for (size_t i = pos_; i < fend; ++i)
        if (s_[i] != '_') text.push_back(s_[i]);
      Token& t = Emit(Tok::kFloat, pos_, text);
      t.float_value = std::strtod(text.c_str(), nullptr);
      pos_ = fend;
      return;
    }
    // Integers: 0x / 0o / 0b prefixes, or decimal.
    int base = 10;
    size_t p = pos_, end = a;
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() &&
        (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'o' || s_[pos_ + 1] == 'b' || s_[pos_ + 1] == 'X' ||
         s_[pos_ + 1] == 'O' || s_[pos_ + 1] == 'B')) {
      const char k = static_cast<char>(s_[pos_ + 1] | 0x20);
      base = k == 'x' ? 16 : (k == 'o' ? 8 : 2);
      p = pos_ + 2;
      end = p;
      while (end < s_.size() &&
             (std::isxdigit(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
        ++end;
    }
    std::string digits;
    for (size_t i = p; i < end; ++i)
      if (s_[i] != '_') digits.push_back(s_[i]);
    errno = 0;
    char* stop = nullptr;
    const long long v = std::strtoll(digits.c_str(), &stop, base);
    if (digits.empty() || *stop != '\0') Fail(pos_, "invalid integer literal");
    if (errno == ERANGE) Fail(pos_, "integer literal too large");
    Token& t = Emit(Tok::kInt, pos_, s_.substr(pos_, end - pos_));
    t.int_value = v;
    pos_ = end;
  }

  void LexString() {
    const char q = s_[pos_];
    const size_t start = pos_;
    std::string out;
    size_t p = pos_ + 1;
    auto hex = [&](size_t at, int n) -> char32_t {
      if (at + n > s_.size()) Fail(at, "truncated escape sequence in string literal");
      char32_t v = 0;
      for (int i = 0; i < n; ++i) {
        const char h = s_[at + i];
        int d;
        if (h >= '0' && h <= '9')
          d = h - '0';
        else if (h >= 'a' && h <= 'f')
          d = h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
          d = h - 'A' + 10;
        else
          Fail(at, "truncated escape sequence in string literal");
        v = v * 16 + static_cast<char32_t>(d);
      }
      return v;
    };
    while (true) {
      if (p >= s_.size()) Fail(start, "unterminated string literal");
      const char c = s_[p];
      if (c == q) break;
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= s_.size()) Fail(start, "unterminated string literal");
      const char e = s_[p + 1];
      p += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
          AppendUtf8(out, hex(p, 2));
          p += 2;
          break;
        case 'u':
          AppendUtf8(out, hex(p, 4));
          p += 4;
          break;
        case 'U': {
          const char32_t v = hex(p, 8);
          if (v > 0x10FFFF) Fail(p, "illegal Unicode character in string literal");
          AppendUtf8(out, v);
          p += 8;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int i = 0; i < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; ++i, ++p)
              v = v * 8 + static_cast<char32_t>(s_[p] - '0');
            AppendUtf8(out, v);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    Emit(Tok::kString, start, std::move(out));
    pos_ = p + 1;
  }

  void LexOperator(std::vector<char>& brackets) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (StartsWith(pos_, op)) {
        Emit(Tok::kOp, pos_, op);
        pos_ += 2;
        return;
      }
    }
    const char c = s_[pos_];
    if (!std::strchr("+-/*%~[](){}<>=.:|,;", c) || c == '\0') {
      std::string shown;
      const std::u32string cp = DecodeUtf8(std::string_view(s_).substr(pos_, 4));
      AppendUtf8(shown, cp.empty() ? U'?' : cp[0]);
      Fail(pos_, fmt::format("unexpected char {} at {}", PyReprString(shown), pos_));
    }
    if (c == '{') brackets.push_back('}');
    if (c == '(') brackets.push_back(')');
    if (c == '[') brackets.push_back(']');
    if (c == '}' || c == ')' || c == ']') {
      if (brackets.empty()) Fail(pos_, fmt::format("unexpected '{}'", c));
      const char want = brackets.back();
      brackets.pop_back();
      if (want != c) Fail(pos_, fmt::format("unexpected '{}', expected '{}'", c, want));
    }
    Emit(Tok::kOp, pos_, std::string(1, c));
    ++pos_;
  }

  const std::string& s_;
  const LexOptions o_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> Lex(const std::string& source, const LexOptions& options) {
  return Lexer(source, options).Run();
}

}  // namespace tq::jinja
