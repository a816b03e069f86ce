// Python-compatible text helpers for the Jinja engine: UTF-8 <-> code points, str.isspace,
// case mapping (ICU), and Python's repr() of str and float.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tq::jinja {

// Decodes UTF-8 into code points; an invalid byte decodes as itself (U+0080..U+00FF range),
// so decoding never fails and Encode(Decode(s)) == s for valid input.
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view cps);
void AppendUtf8(std::string& out, char32_t cp);
// Number of code points (Python len(str)).
size_t CodePointCount(std::string_view s);
bool IsAscii(std::string_view s);

// Python str.isspace() for one code point.
bool IsPySpace(char32_t c);
bool IsPyAlpha(char32_t c);
bool IsPyDigit(char32_t c);
bool IsPyUpper(char32_t c);
bool IsPyLower(char32_t c);

// Full Unicode case mapping (Python str.upper()/lower()).
std::string ToUpper(std::string_view s);
std::string ToLower(std::string_view s);
// One code point upper-cased (title-case for capitalize()).
std::string UpperChar(char32_t c);

// Python str.strip/lstrip/rstrip: `chars` null -> whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
// Python str.split(sep=None|sep, maxsplit=-1) and rsplit.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit);
// Python str.splitlines() (keepends=False).
std::vector<std::string> PySplitLines(std::string_view s);
// Python str.replace(old, new, count=-1), on code points (an empty `old` inserts between them).
std::string PyReplace(std::string_view s, std::string_view from, std::string_view to,
                      int64_t count);

// Python repr(str): quotes chosen as CPython does, escapes for non-printables.
std::string PyReprString(std::string_view s);
// Python repr(float) == str(float): shortest round-trip digits, 'e' notation outside
// [1e-4, 1e16), "inf"/"nan".
std::string PyReprFloat(double v);

}  // namespace tq::jinja
