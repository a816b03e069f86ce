#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

TEST(MappedFile, MapsContents) {
  test::TempDir dir;
  test::WriteFile(dir.file("a"), "hello");
  auto f = MappedFile::Open(dir.file("a"));
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), 5), "hello");
  MappedFile g = std::move(f);
  EXPECT_EQ(g.size(), 5u);
  EXPECT_EQ(f.size(), 0u);
}

TEST(MappedFile, EmptyAndMissing) {
  test::TempDir dir;
  test::WriteFile(dir.file("empty"), "");
  EXPECT_EQ(MappedFile::Open(dir.file("empty")).size(), 0u);
  try {
    MappedFile::Open(dir.file("nope"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
  EXPECT_THROW(MappedFile::Open(dir.path().string()), Error);  // a directory
}

TEST(MappedFile, AtomicWriteLeavesNoTemp) {
  test::TempDir dir;
  WriteFileAtomic(dir.file("x.json"), "{}");
  EXPECT_EQ(ReadFileToString(dir.file("x.json")), "{}");
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) (void)e, ++n;
  EXPECT_EQ(n, 1);
  EXPECT_THROW(WriteFileAtomic(dir.file("no/such/dir/x"), "a"), Error);
}

}  // namespace
}  // namespace tq
