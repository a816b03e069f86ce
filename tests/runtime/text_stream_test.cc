// TextStream: detokenization anchored on the prompt, then stop strings, as Sequence and the
// server's sinks use it.
#include "runtime/text_stream.h"

#include <gtest/gtest.h>

namespace tq {
namespace {

// Token t decodes to the character 'a' + t.
std::string Decode(std::span<const int32_t> ids) {
  std::string s;
  for (int32_t t : ids) s += char('a' + t);
  return s;
}

TEST(TextStream, StreamsThenStopsBeforeTheStopString) {
  const int32_t prompt[] = {0, 1};
  TextStream s(Decode, {"de"}, prompt);
  std::string seen;
  seen += s.Push(2).text;  // c
  auto r = s.Push(3);      // d: may start "de", held back
  seen += r.text;
  EXPECT_FALSE(r.stopped);
  r = s.Push(4);  // e: "de" completes
  seen += r.text;
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(seen, "c");
  std::string tail;
  EXPECT_FALSE(s.Finish(&tail));  // stopped already: nothing more
  EXPECT_EQ(tail, "");
}

TEST(TextStream, FinishReleasesHeldBackText) {
  TextStream s(Decode, {"dx"}, {});
  std::string seen;
  seen += s.Push(2).text;
  seen += s.Push(3).text;  // "d" held back: could start "dx"
  std::string tail;
  EXPECT_FALSE(s.Finish(&tail));
  EXPECT_EQ(seen + tail, "cd");
}

}  // namespace
}  // namespace tq
