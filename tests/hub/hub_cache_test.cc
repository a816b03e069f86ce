// The local cache as huggingface_hub lays it out: refs/<branch> -> snapshots/<commit>/ whose
// files are relative symlinks into blobs/.
#include "hub/hub_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/mapped_file.h"
#include "hub/model_ref.h"
#include "testutil/testutil.h"

namespace tq::hub {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using test::WriteFile;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

// Writes a huggingface_hub-style repository: blobs, snapshot symlinks, refs/main.
fs::path MakeCachedRepo(const fs::path& root, const std::string& folder,
                        const std::vector<std::pair<std::string, std::string>>& files,
                        const std::string& ref = "main") {
  const fs::path repo = root / folder;
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / kCommit);
  int i = 0;
  for (const auto& [name, data] : files) {
    const std::string blob = fmt::format("{:040x}", ++i);
    WriteFile((repo / "blobs" / blob).string(), data);
    fs::create_symlink(fs::path("../../blobs") / blob, repo / "snapshots" / kCommit / name);
  }
  fs::create_directories(repo / "refs");
  WriteFile((repo / "refs" / ref).string(), kCommit);  // huggingface_hub writes no newline
  return repo;
}

struct EnvGuard {
  std::string name;
  std::optional<std::string> old;
  EnvGuard(const char* n, const std::optional<std::string>& v) : name(n) {
    if (const char* o = getenv(n)) old = o;
    if (v) {
      setenv(n, v->c_str(), 1);
    } else {
      unsetenv(n);
    }
  }
  ~EnvGuard() {
    if (old) {
      setenv(name.c_str(), old->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
};

TEST(HubCache, RootFollowsHuggingFaceHubSettings) {
  EnvGuard a("HF_HUB_CACHE", std::nullopt), b("HUGGINGFACE_HUB_CACHE", std::nullopt),
      c("HF_HOME", std::nullopt), d("XDG_CACHE_HOME", std::nullopt), h("HOME", "/home/u");
  EXPECT_EQ(FindCacheRoot().dir, "/home/u/.cache/huggingface/hub");
  EnvGuard x("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(FindCacheRoot().dir, "/xdg/huggingface/hub");
  EnvGuard y("HF_HOME", "~/hf");
  EXPECT_EQ(FindCacheRoot().dir, "/home/u/hf/hub");
  EXPECT_EQ(FindCacheRoot().source, "HF_HOME");
  EnvGuard z("HF_HUB_CACHE", "/cache");
  EXPECT_EQ(FindCacheRoot().dir, "/cache");
}

TEST(HubCache, OfflineFlag) {
  for (const char* on : {"1", "ON", "yes", "True"}) {
    EnvGuard g("HF_HUB_OFFLINE", on);
    EXPECT_TRUE(HubOffline()) << on;
  }
  for (const char* off : {"0", "", "no"}) {
    EnvGuard g("HF_HUB_OFFLINE", off);
    EXPECT_FALSE(HubOffline()) << off;
  }
}

TEST(HubCache, ResolvesRefsAndCommitsThroughSymlinks) {
  TempDir t;
  MakeCachedRepo(t.path(), "models--org--tiny",
                 {{"config.json", "{}"}, {"model.safetensors", "x"}});
  std::string why;
  auto s = FindCachedSnapshot(*ParseHubId("org/tiny"), t.path().string(), &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->commit, kCommit);
  EXPECT_EQ(s->dir, (t.path() / "models--org--tiny" / "snapshots" / kCommit).string());
  EXPECT_TRUE(fs::is_symlink(fs::path(s->dir) / "config.json"));
  s = FindCachedSnapshot(*ParseHubId("org/tiny@" + kCommit), t.path().string(), &why);
  ASSERT_TRUE(s) << why;
  EXPECT_FALSE(FindCachedSnapshot(*ParseHubId("org/tiny@dev"), t.path().string(), &why));
  EXPECT_NE(why.find("revision 'dev'"), std::string::npos) << why;
  EXPECT_FALSE(FindCachedSnapshot(*ParseHubId("org/other"), t.path().string(), &why));
  EXPECT_NE(why.find("not in the cache"), std::string::npos) << why;
}

TEST(HubCache, IncompleteSnapshotsAreNotUsed) {
  TempDir t;
  const fs::path repo = MakeCachedRepo(t.path(), "models--org--sharded",
                                       {{"config.json", "{}"},
                                        {"model.safetensors.index.json",
                                         R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                           "b": "model-00002-of-00002.safetensors"}})"},
                                        {"model-00001-of-00002.safetensors", "x"}});
  std::string why;
  EXPECT_FALSE(FindCachedSnapshot(*ParseHubId("org/sharded"), t.path().string(), &why));
  EXPECT_NE(why.find("model-00002-of-00002.safetensors"), std::string::npos) << why;
  // A dangling link (a blob removed by `huggingface-cli delete-cache`, say).
  const fs::path repo2 = MakeCachedRepo(t.path(), "models--org--dangling",
                                        {{"config.json", "{}"}, {"model.safetensors", "x"}});
  fs::remove(repo2 / "blobs" / fmt::format("{:040x}", 2));
  EXPECT_FALSE(FindCachedSnapshot(*ParseHubId("org/dangling"), t.path().string(), &why));
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
  // Only the JSON files (download --include '*.json'): no weights, not usable.
  MakeCachedRepo(t.path(), "models--org--jsononly", {{"config.json", "{}"}});
  EXPECT_FALSE(FindCachedSnapshot(*ParseHubId("org/jsononly"), t.path().string(), &why));
  EXPECT_NE(why.find("no model.safetensors"), std::string::npos) << why;
  // A ref that holds garbage.
  WriteFile((repo / "refs" / "main").string(), "not a commit");
  EXPECT_FALSE(FindCachedSnapshot(*ParseHubId("org/sharded"), t.path().string(), &why));
  EXPECT_NE(why.find("commit hash"), std::string::npos) << why;
}

TEST(HubCache, LinkSnapshotFileIsRelativeAndReplaces) {
  TempDir t;
  const RepoCachePaths p = CachePathsFor(*ParseHubId("org/x"), t.path().string());
  fs::create_directories(fs::path(p.BlobPath("e1")).parent_path());
  WriteFile(p.BlobPath("e1"), "one");
  WriteFile(p.BlobPath("e2"), "two");
  LinkSnapshotFile(p, kCommit, "sub/dir/f.txt", "e1");
  const fs::path link = fs::path(p.SnapshotDir(kCommit)) / "sub/dir/f.txt";
  EXPECT_EQ(fs::read_symlink(link), fs::path("../../../../blobs/e1"));
  LinkSnapshotFile(p, kCommit, "sub/dir/f.txt", "e2");
  EXPECT_EQ(ReadFileToString(link.string()), "two");
  WriteRef(p, "main", kCommit);
  EXPECT_EQ(ReadFileToString(p.RefPath("main")), kCommit);
}

TEST(ModelRef, DirectoriesHubIdsAndGguf) {
  TempDir t;
  EnvGuard g("HF_HUB_CACHE", t.path().string());
  MakeCachedRepo(t.path(), "models--org--tiny",
                 {{"config.json", "{}"}, {"model.safetensors", "x"}});
  ModelRef r = ResolveModelRef(t.path().string());
  EXPECT_EQ(r.kind, ModelRefKind::kDirectory);
  r = ResolveModelRef("org/tiny");
  EXPECT_EQ(r.kind, ModelRefKind::kCachedHub);
  EXPECT_EQ(r.commit, kCommit);
  r = ResolveModelRef("org/absent");
  EXPECT_EQ(r.kind, ModelRefKind::kUncachedHub);
  EXPECT_EQ(DownloadCommand(*r.id), "turboquant download org/absent");
  EXPECT_EQ(DownloadCommand(*ParseHubId("org/absent@v2")),
            "turboquant download org/absent --revision v2");
  auto fails_with = [](const std::string& arg, const std::string& want) {
    try {
      ResolveModelRef(arg);
      ADD_FAILURE() << arg << " resolved";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  fails_with("./no/such/dir", "no such directory");
  // GGUF v3: magic, version, tensor count, kv count.
  std::string gguf = "GGUF";
  for (uint64_t v : {uint64_t(3)}) gguf.append(reinterpret_cast<const char*>(&v), 4);
  for (uint64_t v : {uint64_t(291), uint64_t(24)})
    gguf.append(reinterpret_cast<const char*>(&v), 8);
  WriteFile(t.file("model-q4.gguf"), gguf);
  fails_with(t.file("model-q4.gguf"), "is a GGUF file (GGUF version 3, 291 tensors)");
  fails_with(t.file("model-q4.gguf"), "not GGUF");
  const fs::path gdir = t.path() / "ggufdir";
  fs::create_directories(gdir);
  WriteFile((gdir / "x.gguf").string(), gguf);
  fails_with(gdir.string(), "holds no config.json but GGUF file(s) such as x.gguf");
  WriteFile(t.file("plain.txt"), "hello");
  fails_with(t.file("plain.txt"), "is a file");
  // A header cut short is still a GGUF file (the advice is the same); fewer than 4 bytes, or
  // another magic, is reported as the file it is.
  WriteFile(t.file("short.gguf"), "GGUF\x03\x00");
  fails_with(t.file("short.gguf"), "is a GGUF file (GGUF, truncated header)");
  WriteFile(t.file("tiny.gguf"), "GGU");
  fails_with(t.file("tiny.gguf"), "is a file");
}

}  // namespace
}  // namespace tq::hub
