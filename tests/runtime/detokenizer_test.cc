#include "runtime/detokenizer.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace tq {
namespace {

// A toy SentencePiece-like decoder: "▁" is a space, <0xNN> byte tokens with lossy UTF-8 (bad
// bytes become U+FFFD), and the leading space of the whole decode is stripped (Strip decoder).
const std::vector<std::string> kVocab = {"▁Hello", "▁world", "<0xE2>", "<0x82>",
                                         "<0xAC>", "!",      "▁"};

std::string ToyDecode(std::span<const int32_t> ids) {
  std::string bytes;
  for (int32_t id : ids) {
    const std::string& t = kVocab[size_t(id)];
    if (t.rfind("<0x", 0) == 0) {
      bytes.push_back(char(std::stoi(t.substr(3, 2), nullptr, 16)));
    } else {
      const std::string_view marker = "▁";
      for (size_t i = 0; i < t.size();) {
        if (std::string_view(t).substr(i, marker.size()) == marker) {
          bytes += ' ';
          i += marker.size();
        } else {
          bytes += t[i++];
        }
      }
    }
  }
  // Lossy UTF-8: a byte that does not start a complete character becomes U+FFFD.
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (len > 1 &&
        (i + len > bytes.size() || !IsCompleteUtf8(std::string_view(bytes).substr(i, len)))) {
      out += "\xEF\xBF\xBD";
      i += 1;
      continue;
    }
    out.append(bytes, i, len);
    i += len;
  }
  if (!out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

TEST(Detokenizer, IsCompleteUtf8) {
  EXPECT_TRUE(IsCompleteUtf8("abc"));
  EXPECT_TRUE(IsCompleteUtf8("\xE2\x82\xAC"));
  EXPECT_FALSE(IsCompleteUtf8("\xE2\x82"));
  EXPECT_FALSE(IsCompleteUtf8("a\xEF\xBF\xBD"));
  EXPECT_FALSE(IsCompleteUtf8("\x80"));
  EXPECT_TRUE(IsCompleteUtf8(""));
}

TEST(Detokenizer, LeadingSpaceAndSplitCharacter) {
  IncrementalDetokenizer d(ToyDecode);
  d.Reset();
  std::string all;
  std::vector<std::string> pieces;
  for (int32_t id : {0, 1, 6, 2, 3, 4, 5}) {
    std::string p(d.Push(id));
    pieces.push_back(p);
    all += p;
  }
  all += d.Flush();
  EXPECT_EQ(all, "Hello world €!");
  // The euro sign appears whole, on its last byte; nothing broken is ever emitted.
  EXPECT_EQ(pieces[2], " ");
  EXPECT_EQ(pieces[3], "");
  EXPECT_EQ(pieces[4], "");
  EXPECT_EQ(pieces[5], "\xE2\x82\xAC");
  for (const auto& p : pieces) EXPECT_TRUE(p.empty() || IsCompleteUtf8(p)) << p;
}

TEST(Detokenizer, ContextKeepsSpaceOfFirstToken) {
  IncrementalDetokenizer d(ToyDecode);
  const int32_t ctx[] = {0};
  d.Reset(ctx);  // "Hello" already shown (the prompt)
  EXPECT_EQ(d.Push(1), " world");
  // Without context, Strip eats the space as it would decoding the output alone.
  d.Reset();
  EXPECT_EQ(d.Push(1), "world");
}

TEST(Detokenizer, FlushReleasesIncompleteBytes) {
  IncrementalDetokenizer d(ToyDecode);
  d.Reset();
  EXPECT_EQ(d.Push(5), "!");
  EXPECT_EQ(d.Push(2), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.Flush(), "");
}

TEST(Detokenizer, RawInvalidBytesAreNotHeldForever) {
  // A decoder that returns raw bytes (not U+FFFD) for invalid sequences.
  IncrementalDetokenizer d(
      [](std::span<const int32_t> ids) { return std::string(ids.size(), '\x80'); });
  d.Reset();
  std::string all;
  for (size_t i = 0; i <= kMaxHeldTokens; ++i) all += d.Push(1);
  std::string want;
  for (size_t i = 0; i <= kMaxHeldTokens; ++i) want += "\xEF\xBF\xBD";
  EXPECT_EQ(all, want);  // every byte as U+FFFD, once
  EXPECT_EQ(SanitizeUtf8("a\xE2\x82"
                         "b\xF0"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(Detokenizer, LongStreamsStayConsistent) {
  IncrementalDetokenizer d(ToyDecode);
  d.Reset();
  std::string all;
  std::vector<int32_t> ids;
  for (int i = 0; i < 500; ++i) {
    int32_t id = (i % 7 == 3) ? 2 : (i % 7 == 4) ? 3 : (i % 7 == 5) ? 4 : int32_t(i % 2);
    ids.push_back(id);
    all += d.Push(id);
  }
  all += d.Flush();
  EXPECT_EQ(all, ToyDecode(ids));
}

}  // namespace
}  // namespace tq
