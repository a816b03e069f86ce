#include "io/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using ::testing::HasSubstr;

// Writes a shard holding U8 tensors of 4 bytes each, value = index.
void WriteShard(const std::string& path, const std::vector<std::string>& names) {
  SafetensorsWriter w(path);
  for (const auto& n : names) w.Declare(n, DType::U8, {4});
  uint8_t v = 0;
  for (const auto& n : names) {
    const uint8_t b[4] = {v, v, v, v};
    w.WriteTensor(n, b, 4);
    ++v;
  }
  w.Finish();
}

void WriteIndex(const std::string& dir, const std::string& weight_map) {
  test::WriteFile(dir + "/model.safetensors.index.json",
                  R"({"metadata":{"total_size":16},"weight_map":)" + weight_map + "}");
}

std::string ErrorOf(const std::string& dir) {
  try {
    Checkpoint::Open(dir);
  } catch (const Error& e) {
    // Header-only reading must reject the same directories.
    EXPECT_THROW(Checkpoint::ReadHeaders(dir), Error);
    return e.what();
  }
  ADD_FAILURE() << "no error for " << dir;
  return "";
}

TEST(Checkpoint, SingleFile) {
  test::TempDir d;
  WriteShard(d.file("model.safetensors"), {"a", "b"});
  auto c = Checkpoint::Open(d.path().string());
  EXPECT_EQ(c->Names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c->View("b").bytes()[0], 1);
  EXPECT_EQ(c->TotalBytes(), 8u);
  EXPECT_EQ(c->shards().size(), 1u);
  try {
    c->View("zz");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing tensor 'zz'"));
  }
}

TEST(Checkpoint, Sharded) {
  test::TempDir d;
  WriteShard(d.file("model-00001-of-00002.safetensors"), {"a", "b"});
  WriteShard(d.file("model-00002-of-00002.safetensors"), {"c", "d"});
  WriteIndex(d.path().string(),
             R"({"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors",)"
             R"("c":"model-00002-of-00002.safetensors","d":"model-00002-of-00002.safetensors"})");
  auto c = Checkpoint::Open(d.path().string());
  EXPECT_EQ(c->shards().size(), 2u);
  EXPECT_EQ(c->Names().size(), 4u);
  EXPECT_EQ(c->View("d").bytes()[0], 1);
  EXPECT_EQ(c->View("c").bytes()[0], 0);
  EXPECT_THAT(c->ShardOf("c").path(), HasSubstr("00002"));
  EXPECT_EQ(c->TotalBytes(), 16u);

  std::vector<std::string> files;
  const auto infos = Checkpoint::ReadHeaders(d.path().string(), &files);
  ASSERT_EQ(files.size(), 2u);
  ASSERT_EQ(infos.size(), 4u);
  for (const auto& t : infos)
    EXPECT_EQ(t.shard, (t.name == "a" || t.name == "b") ? 0u : 1u) << t.name;
}

TEST(Checkpoint, ShardingErrors) {
  {
    test::TempDir d;  // a shard the index names is missing
    WriteShard(d.file("s1.safetensors"), {"a"});
    WriteIndex(d.path().string(), R"({"a":"s1.safetensors","b":"s2.safetensors"})");
    const std::string e = ErrorOf(d.path().string());
    EXPECT_THAT(e, HasSubstr("shard 's2.safetensors'"));
    EXPECT_THAT(e, HasSubstr("missing"));
  }
  {
    test::TempDir d;  // the index names a tensor its shard lacks
    WriteShard(d.file("s1.safetensors"), {"a"});
    WriteShard(d.file("s2.safetensors"), {"b"});
    WriteIndex(d.path().string(), R"({"a":"s1.safetensors","b":"s1.safetensors"})");
    const std::string e = ErrorOf(d.path().string());
    EXPECT_THAT(e, HasSubstr("tensor 'b'"));
    EXPECT_THAT(e, HasSubstr("s1.safetensors"));
  }
  {
    test::TempDir d;  // one name in two shards
    WriteShard(d.file("s1.safetensors"), {"a", "x"});
    WriteShard(d.file("s2.safetensors"), {"b", "x"});
    WriteIndex(d.path().string(), R"({"a":"s1.safetensors","b":"s2.safetensors"})");
    const std::string e = ErrorOf(d.path().string());
    EXPECT_THAT(e, HasSubstr("tensor 'x'"));
    EXPECT_THAT(e, HasSubstr("two shards"));
  }
  {
    test::TempDir d;  // hostile shard names
    WriteShard(d.file("s1.safetensors"), {"a"});
    WriteIndex(d.path().string(), R"({"a":"../s1.safetensors"})");
    EXPECT_THAT(ErrorOf(d.path().string()), HasSubstr("not a plain file name"));
    WriteIndex(d.path().string(), R"({"a":3})");
    EXPECT_THAT(ErrorOf(d.path().string()), HasSubstr("expected a file name"));
    WriteIndex(d.path().string(), R"({})");
    EXPECT_THAT(ErrorOf(d.path().string()), HasSubstr("weight_map"));
    test::WriteFile(d.file("model.safetensors.index.json"), R"({"metadata":{}})");
    EXPECT_THAT(ErrorOf(d.path().string()), HasSubstr("'weight_map'"));
    test::WriteFile(d.file("model.safetensors.index.json"), "{not json");
    EXPECT_THAT(ErrorOf(d.path().string()), HasSubstr("invalid JSON"));
  }
  {
    test::TempDir d;  // a broken shard
    test::WriteFile(d.file("model.safetensors"), "junk");
    EXPECT_THAT(ErrorOf(d.path().string()), HasSubstr("too short"));
  }
}

TEST(Checkpoint, NoWeightsListsWhatWasFound) {
  test::TempDir d;
  test::WriteFile(d.file("config.json"), "{}");
  std::string e = ErrorOf(d.path().string());
  EXPECT_THAT(e, HasSubstr("config.json"));
  EXPECT_THAT(e, HasSubstr("model.safetensors.index.json"));
  WriteShard(d.file("model-00001-of-00002.safetensors"), {"a"});
  WriteShard(d.file("model-00002-of-00002.safetensors"), {"b"});
  e = ErrorOf(d.path().string());
  EXPECT_THAT(e, HasSubstr("model-00001-of-00002.safetensors, model-00002-of-00002.safetensors"));
  EXPECT_THAT(e, HasSubstr("no model.safetensors.index.json"));
  EXPECT_THAT(ErrorOf(d.file("nonexistent")), HasSubstr("not a directory"));
}

TEST(Checkpoint, SharedModels) {
  for (const char* name : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    SCOPED_TRACE(name);
    auto c = Checkpoint::Open(test::ModelDir(name));
    EXPECT_TRUE(c->Has("model.embed_tokens.weight"));
    EXPECT_TRUE(c->Has("model.norm.weight"));
    EXPECT_FALSE(c->Has("lm_head.weight"));  // tied
    EXPECT_EQ(c->Info("model.norm.weight").dtype, DType::BF16);
    EXPECT_EQ(Checkpoint::ReadHeaders(test::ModelDir(name)).size(), c->Names().size());
  }
}

}  // namespace
}  // namespace tq
