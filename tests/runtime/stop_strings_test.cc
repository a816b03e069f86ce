#include "runtime/stop_strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tq {
namespace {

// Feeds pieces; returns everything shown, and checks no shown prefix ever contains a partial
// stop string at its end that later turns out to be a stop string.
struct Fed {
  std::string shown;
  bool stopped = false;
};

Fed Feed(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopStringMatcher m(stops);
  Fed f;
  for (const auto& p : pieces) {
    auto r = m.Push(p);
    f.shown += r.text;
    if (r.stopped) {
      f.stopped = true;
      return f;
    }
  }
  f.shown += m.Flush();
  return f;
}

TEST(StopStrings, NoStopsPassThrough) {
  auto f = Feed({}, {"a", "b"});
  EXPECT_EQ(f.shown, "ab");
  EXPECT_FALSE(f.stopped);
}

TEST(StopStrings, StopAcrossPieces) {
  auto f = Feed({"</end>"}, {"Hello </", "en", "d> more"});
  EXPECT_TRUE(f.stopped);
  EXPECT_EQ(f.shown, "Hello ");
}

TEST(StopStrings, NeverShowsPartialStop) {
  StopStringMatcher m({"STOP"});
  auto r = m.Push("abcST");
  EXPECT_EQ(r.text, "abc");
  r = m.Push("O");
  EXPECT_EQ(r.text, "");
  r = m.Push("P!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  // After a stop nothing more is shown.
  EXPECT_EQ(m.Push("x").text, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStrings, HeldTextReleasedWhenItDiverges) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(m.Push("abST").text, "ab");
  EXPECT_EQ(m.Push("OX").text, "STOX");
  EXPECT_EQ(m.Push("S").text, "");
  EXPECT_EQ(m.Flush(), "S");  // end of generation: the held text is real output
}

TEST(StopStrings, OverlappingPrefixes) {
  // "aab": after "aa", then "ab" -> "aaab" contains "aab" at 1.
  auto f = Feed({"aab"}, {"aa", "ab"});
  EXPECT_TRUE(f.stopped);
  EXPECT_EQ(f.shown, "a");
  f = Feed({"aab"}, {"a", "a", "a", "c"});
  EXPECT_FALSE(f.stopped);
  EXPECT_EQ(f.shown, "aaac");
}

TEST(StopStrings, EarliestOfSeveral) {
  auto f = Feed({"world", "lo w"}, {"hello world"});
  EXPECT_TRUE(f.stopped);
  EXPECT_EQ(f.shown, "hel");
  f = Feed({"", "x"}, {"abc"});  // empty stop strings are ignored
  EXPECT_EQ(f.shown, "abc");
}

TEST(StopStrings, EveryPrefixSafeOnRandomSplits) {
  // Whatever the split, the shown text is exactly the text before the first stop string.
  const std::string text = "one two <|im_end|> three";
  const std::vector<std::string> stops = {"<|im_end|>", "<|im"};
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      auto f = Feed(stops, {text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      ASSERT_TRUE(f.stopped);
      ASSERT_EQ(f.shown, "one two ") << a << " " << b;
    }
  }
}

}  // namespace
}  // namespace tq
