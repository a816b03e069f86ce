// GPT-2's byte-level alphabet: every byte maps to one printable code point (printable Latin-1
// bytes to themselves, the other 68 to U+0100..U+0143), so any byte string is a string of
// "characters" a BPE vocab can hold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tq::tok {

// Appends the byte-level characters of every byte of `bytes` to `out`.
void ByteLevelEncode(std::string_view bytes, std::string& out);

// The byte of byte-level character `c`, or -1 when `c` is not in the alphabet.
int ByteLevelByte(char32_t c);

// GPT-2's pre-tokenization regex (used by ByteLevel with use_regex).
extern const char kGpt2Regex[];

}  // namespace tq::tok
