#include "hub/hub_id.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tq::hub {
namespace {

TEST(HubId, ParsesOrgNameAndRevision) {
  auto h = ParseHubId("Qwen/Qwen3-8B");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->org, "Qwen");
  EXPECT_EQ(h->name, "Qwen3-8B");
  EXPECT_EQ(h->revision, "main");
  EXPECT_FALSE(h->revision_given);
  EXPECT_EQ(h->CacheFolder(), "models--Qwen--Qwen3-8B");
  h = ParseHubId("manjunathshiva/Qwen3.6-35B-A3B-tq3a-tqTe-down4-g64@refs/pr/1");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->revision, "refs/pr/1");
  EXPECT_TRUE(h->revision_given);
  EXPECT_EQ(h->ToString(), "manjunathshiva/Qwen3.6-35B-A3B-tq3a-tqTe-down4-g64@refs/pr/1");
}

TEST(HubId, RejectsPathsAndBadNames) {
  for (const char* bad : {"", "x", "./a", "/abs/dir", "a/b/c", "a/", "/b", "a//b", "-a/b", "a/b.",
                          "a--x/b", "a/b..c", "a/b c", "a/b@", "a/b@..", "a/b@/x", "org/näme"})
    EXPECT_FALSE(ParseHubId(bad)) << bad;
  EXPECT_FALSE(ParseHubId("a/" + std::string(97, 'x')));
  try {
    ParseHubIdOrThrow("a/b/c", "download");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("[download] 'a/b/c' is not a hub id"), std::string::npos)
        << e.what();
  }
}

TEST(HubId, CommitHashes) {
  EXPECT_TRUE(IsCommitHash(std::string(40, 'a')));
  EXPECT_FALSE(IsCommitHash(std::string(39, 'a')));
  EXPECT_FALSE(IsCommitHash(std::string(40, 'A')));
  EXPECT_FALSE(IsCommitHash(std::string(40, 'g')));
}

}  // namespace
}  // namespace tq::hub
