#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace tq::tok {

const char kGpt2Regex[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char;
  std::array<std::array<char, 3>, 256> utf8;  // UTF-8 of byte_to_char (1..2 bytes), [2] = length
  std::array<int16_t, 324> char_to_byte;      // code points below 0x144
  Tables() {
    char_to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? char32_t(b) : char32_t(256 + next++);
      byte_to_char[b] = c;
      char_to_byte[c] = int16_t(b);
      std::string s;
      AppendUtf8(s, c);
      utf8[b] = {s[0], s.size() > 1 ? s[1] : '\0', char(s.size())};
    }
  }
};

const Tables& GetTables() {
  static const Tables t;
  return t;
}

}  // namespace

void ByteLevelEncode(std::string_view bytes, std::string& out) {
  const Tables& t = GetTables();
  out.reserve(out.size() + bytes.size() * 2);
  for (char ch : bytes) {
    const auto& u = t.utf8[uint8_t(ch)];
    out.append(u.data(), size_t(u[2]));
  }
}

int ByteLevelByte(char32_t c) {
  const Tables& t = GetTables();
  return c < t.char_to_byte.size() ? t.char_to_byte[c] : -1;
}

}  // namespace tq::tok
