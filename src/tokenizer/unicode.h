// UTF-8 and Unicode character classes as Rust's `char` methods define them (the `tokenizers`
// library is written against those), answered by ICU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tq::tok {

// Byte length of the UTF-8 sequence that starts with `lead` (1 for a stray byte).
inline size_t Utf8Len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the code point at s[i] of *valid* UTF-8 and advances i past it.
inline char32_t NextChar(std::string_view s, size_t& i) {
  const uint8_t b0 = uint8_t(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = Utf8Len(b0);
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// The code point that ends just before s[end] (valid UTF-8); sets *begin to its first byte.
char32_t PrevChar(std::string_view s, size_t end, size_t* begin);

void AppendUtf8(std::string& out, char32_t cp);

bool IsValidUtf8(std::string_view s);
// Replaces each maximal invalid subpart by U+FFFD (Rust's String::from_utf8_lossy, Python's
// errors="replace").
std::string ToValidUtf8(std::string_view s);

bool IsWhitespace(char32_t c);    // Rust char::is_whitespace (White_Space property)
bool IsNumeric(char32_t c);       // Rust char::is_numeric (Nd, Nl, No)
bool IsAlphanumeric(char32_t c);  // Rust char::is_alphanumeric (Alphabetic or numeric)
bool IsPunctuation(char32_t c);   // ASCII punctuation or a Unicode P* category
bool IsMark(char32_t c);          // Mn, Mc, Me
// Rust regex's \w: Alphabetic, M, Nd, Pc, Join_Control.
bool IsWordChar(char32_t c);

}  // namespace tq::tok
