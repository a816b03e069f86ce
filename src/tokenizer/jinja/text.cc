#include "tokenizer/jinja/text.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace tq::jinja {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0;
    if (b < 0x80) {
      len = 1, cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      out.push_back(b);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) AppendUtf8(out, c);
  return out;
}

size_t CodePointCount(std::string_view s) {
  if (IsAscii(s)) return s.size();
  return DecodeUtf8(s).size();
}

bool IsAscii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

bool IsPySpace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsPyAlpha(char32_t c) { return u_isalpha(static_cast<UChar32>(c)); }
bool IsPyDigit(char32_t c) { return u_isdigit(static_cast<UChar32>(c)); }
bool IsPyUpper(char32_t c) { return u_isupper(static_cast<UChar32>(c)); }
bool IsPyLower(char32_t c) { return u_islower(static_cast<UChar32>(c)); }

namespace {

std::string IcuCase(std::string_view s, bool upper) {
  icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (upper) {
    u.toUpper(icu::Locale::getRoot());
  } else {
    u.toLower(icu::Locale::getRoot());
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool InChars(char32_t c, const std::u32string* chars) {
  if (!chars) return IsPySpace(c);
  return chars->find(c) != std::u32string::npos;
}

}  // namespace

std::string ToUpper(std::string_view s) {
  if (!IsAscii(s)) return IcuCase(s, true);
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return out;
}

std::string ToLower(std::string_view s) {
  if (!IsAscii(s)) return IcuCase(s, false);
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return out;
}

std::string UpperChar(char32_t c) {
  icu::UnicodeString u(static_cast<UChar32>(c));
  u.toTitle(nullptr, icu::Locale::getRoot(),
            U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string cs = chars ? DecodeUtf8(*chars) : std::u32string();
  const std::u32string* set = chars ? &cs : nullptr;
  std::u32string u = DecodeUtf8(s);
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && InChars(u[b], set)) ++b;
  if (right)
    while (e > b && InChars(u[e - 1], set)) --e;
  return EncodeUtf8(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string u = DecodeUtf8(s);
  size_t i = 0;
  while (true) {
    while (i < u.size() && IsPySpace(u[i])) ++i;
    if (i == u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = u.size();
      while (e > i && IsPySpace(u[e - 1])) --e;
      out.push_back(EncodeUtf8(std::u32string_view(u).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < u.size() && !IsPySpace(u[j])) ++j;
    out.push_back(EncodeUtf8(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::u32string u = DecodeUtf8(s);
    size_t e = u.size();
    while (true) {
      while (e > 0 && IsPySpace(u[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && IsPySpace(u[b])) ++b;
        out.push_back(EncodeUtf8(std::u32string_view(u).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !IsPySpace(u[b - 1])) --b;
      out.push_back(EncodeUtf8(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> out;
  const std::u32string u = DecodeUtf8(s);
  size_t start = 0, i = 0;
  while (i < u.size()) {
    const char32_t c = u[i];
    const bool nl = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                    c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!nl) {
      ++i;
      continue;
    }
    out.push_back(EncodeUtf8(std::u32string_view(u).substr(start, i - start)));
    i += (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    start = i;
  }
  if (start < u.size()) out.push_back(EncodeUtf8(std::u32string_view(u).substr(start)));
  return out;
}

std::string PyReplace(std::string_view s, std::string_view from, std::string_view to,
                      int64_t count) {
  std::string out;
  if (from.empty()) {
    const std::u32string u = DecodeUtf8(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out.append(to);
        ++n;
      }
      if (i < u.size()) AppendUtf8(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t f = s.find(from, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(to);
    pos = f + from.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

namespace {

bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c == ' ') return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::string PyReprString(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (IsPrintable(c)) {
      AppendUtf8(out, c);
    } else {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyReprFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: "[-]d[.ddd]e[+-]XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    i = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k)
    if (sci[k] != '.') digits.push_back(sci[k]);
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (nd > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= nd) {
    out += digits;
    out.append(static_cast<size_t>(decpt - nd), '0');
    out += ".0";
  } else {
    out.append(digits, 0, decpt);
    out.push_back('.');
    out.append(digits, decpt);
  }
  return out;
}

}  // namespace tq::jinja
