// `download` against the fake hub (fake_hub.h) serving a shared model: layout, resume after a cut,
// corruption and contradicting answers never placed, gated repositories, hostile listings.
#include "hub/hub_download.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "hub/fake_hub.h"
#include "hub/hub_cache.h"
#include "testutil/testutil.h"

namespace tq::hub {
namespace {

namespace fs = std::filesystem;
using test::FakeHub;
using test::TempDir;

class HubDownload : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::RequireFile(test::ModelDir("tq-llama-21m") + "/config.json");
    model_ = fs::path(model_).parent_path().string();
    hub_.AddRepoFromDir("tq/llama-21m", model_);
    hub_.AddRepoFromDir("tq/gated", model_, /*gated=*/true);
  }
  HubApi Api(const std::string& token = "") {
    HttpSettings http;
    http.max_redirects = 5;
    http.stall_timeout_s = 10;
    return HubApi(HubAccess{hub_.endpoint(), token, token.empty() ? "" : "--token"}, http);
  }
  DownloadOptions Opts(const std::string& id) {
    DownloadOptions o;
    o.id = *ParseHubId(id);
    o.cache_root = cache_.path().string();
    o.progress = false;
    o.jobs = 3;
    return o;
  }
  std::string ErrorOf(const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
  // No blob and no snapshot entry for the file: nothing half-written was placed.
  void ExpectNothingPlaced(const std::string& id, const std::string& file) {
    const RepoCachePaths p = CachePathsFor(*ParseHubId(id), cache_.path().string());
    const auto& repo = hub_.repo(id);
    EXPECT_FALSE(fs::exists(fs::path(p.SnapshotDir(repo.commit)) / file));
    for (const auto& f : repo.files) {
      if (f.path == file) {
        EXPECT_FALSE(fs::exists(p.BlobPath(f.lfs ? f.sha256 : f.blob_id)));
      }
    }
  }

  std::string model_;
  FakeHub hub_;
  TempDir cache_;
};

TEST_F(HubDownload, FetchesIntoTheHuggingFaceHubLayout) {
  HubApi api = Api();
  const DownloadResult r = Download(api, Opts("tq/llama-21m"));
  const auto& repo = hub_.repo("tq/llama-21m");
  EXPECT_EQ(r.commit, repo.commit);
  // The files turboquant reads (json + safetensors): all of the model's but the shipped copy's
  // README.md, which the default selection leaves out (hub/file_selection.h).
  const auto fetched = [](const auto& f) { return fs::path(f.path).extension() != ".md"; };
  EXPECT_EQ(r.files, int(std::count_if(repo.files.begin(), repo.files.end(), fetched)));
  EXPECT_EQ(r.files_cached, 0);
  const RepoCachePaths p = CachePathsFor(*ParseHubId("tq/llama-21m"), cache_.path().string());
  EXPECT_EQ(ReadFileToString(p.RefPath("main")), repo.commit);
  for (const auto& f : repo.files) {
    if (!fetched(f)) {
      EXPECT_FALSE(fs::exists(fs::path(r.snapshot_dir) / f.path)) << f.path;
      continue;
    }
    const fs::path link = fs::path(r.snapshot_dir) / f.path;
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    EXPECT_EQ(fs::read_symlink(link), fs::path("../../blobs") / (f.lfs ? f.sha256 : f.blob_id));
    EXPECT_EQ(ReadFileToString(link.string()), f.data) << f.path;
  }
  // No .incomplete files or temp links left.
  for (const auto& e : fs::recursive_directory_iterator(p.repo_dir)) {
    EXPECT_EQ(e.path().string().find(".incomplete"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  // Found offline afterwards, and a second download fetches nothing.
  EXPECT_TRUE(FindCachedSnapshot(*ParseHubId("tq/llama-21m"), cache_.path().string()));
  const DownloadResult again = Download(api, Opts("tq/llama-21m"));
  EXPECT_EQ(again.files_cached, again.files);
  EXPECT_EQ(again.bytes_fetched, 0);
}

TEST_F(HubDownload, IncludePatternsSelectFiles) {
  HubApi api = Api();
  DownloadOptions o = Opts("tq/llama-21m");
  o.include = {"*.json"};
  const DownloadResult r = Download(api, o);
  EXPECT_TRUE(fs::exists(fs::path(r.snapshot_dir) / "config.json"));
  EXPECT_FALSE(fs::exists(fs::path(r.snapshot_dir) / "model.safetensors"));
  o.include = {"*.nothing"};
  EXPECT_NE(ErrorOf([&] { Download(api, o); }).find("no file matches the --include patterns"),
            std::string::npos);
}

TEST_F(HubDownload, ResumesAfterACutWithARangeRequest) {
  HubApi api = Api();
  DownloadOptions o = Opts("tq/llama-21m");
  o.include = {"model.safetensors"};
  o.retries = 0;  // the first run stops at the cut and keeps the part
  hub_.cut_after = 3'000'000;
  const std::string err = ErrorOf([&] { Download(api, o); });
  EXPECT_NE(err.find("run again to resume"), std::string::npos) << err;
  ExpectNothingPlaced("tq/llama-21m", "model.safetensors");
  const RepoCachePaths p = CachePathsFor(*ParseHubId("tq/llama-21m"), cache_.path().string());
  const auto& f =
      *std::find_if(hub_.repo("tq/llama-21m").files.begin(), hub_.repo("tq/llama-21m").files.end(),
                    [](const auto& f) { return f.path == "model.safetensors"; });
  ASSERT_EQ(fs::file_size(p.IncompletePath(f.sha256)), 3'000'000u);
  hub_.Reset();
  const DownloadResult r = Download(api, o);
  EXPECT_EQ(r.bytes_resumed, 3'000'000);
  EXPECT_EQ(r.bytes_fetched, int64_t(f.data.size()) - 3'000'000);
  bool ranged = false;
  for (const std::string& q : hub_.Requests())
    ranged = ranged || q.find("Range: bytes=3000000-") != std::string::npos;
  EXPECT_TRUE(ranged);
  EXPECT_EQ(ReadFileToString((fs::path(r.snapshot_dir) / "model.safetensors").string()), f.data);
}

TEST_F(HubDownload, RetriesWithinOneRunAfterACut) {
  HubApi api = Api();
  DownloadOptions o = Opts("tq/llama-21m");
  o.include = {"model.safetensors"};
  hub_.cut_after = 1'000'000;
  const DownloadResult r = Download(api, o);
  EXPECT_EQ(r.bytes_fetched, int64_t(fs::file_size(model_ + "/model.safetensors")));
  EXPECT_EQ(ReadFileToString((fs::path(r.snapshot_dir) / "model.safetensors").string()),
            ReadFileToString(model_ + "/model.safetensors"));
}

TEST_F(HubDownload, ServerIgnoringRangeStartsOver) {
  HubApi api = Api();
  DownloadOptions o = Opts("tq/llama-21m");
  o.include = {"model.safetensors"};
  o.retries = 0;
  hub_.cut_after = 2'000'000;
  ErrorOf([&] { Download(api, o); });
  hub_.Reset();
  hub_.ignore_range = true;
  const DownloadResult r = Download(api, o);
  EXPECT_EQ(ReadFileToString((fs::path(r.snapshot_dir) / "model.safetensors").string()),
            ReadFileToString(model_ + "/model.safetensors"));
}

TEST_F(HubDownload, CorruptBytesAreDetectedAndNothingIsPlaced) {
  HubApi api = Api();
  hub_.corrupt = true;
  DownloadOptions o = Opts("tq/llama-21m");
  o.include = {"model.safetensors"};
  const std::string err = ErrorOf([&] { Download(api, o); });
  EXPECT_NE(err.find("sha256 mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find("nothing was placed"), std::string::npos) << err;
  ExpectNothingPlaced("tq/llama-21m", "model.safetensors");
  // Regular files are checked by their git blob id.
  o.include = {"config.json"};
  const std::string err2 = ErrorOf([&] { Download(api, o); });
  EXPECT_NE(err2.find("git blob sha1 mismatch"), std::string::npos) << err2;
  ExpectNothingPlaced("tq/llama-21m", "config.json");
  const RepoCachePaths p = CachePathsFor(*ParseHubId("tq/llama-21m"), cache_.path().string());
  for (const auto& e : fs::recursive_directory_iterator(p.repo_dir))
    EXPECT_EQ(e.path().string().find(".incomplete"), std::string::npos) << e.path();
}

TEST_F(HubDownload, ContradictingAnswersAreErrors) {
  HubApi api = Api();
  DownloadOptions o = Opts("tq/llama-21m");
  o.include = {"model.safetensors"};
  hub_.bad_etag = true;
  EXPECT_NE(ErrorOf([&] { Download(api, o); }).find("disagrees with the revision listing"),
            std::string::npos);
  ExpectNothingPlaced("tq/llama-21m", "model.safetensors");
  hub_.Reset();
  hub_.size_skew = 7;  // the listing says 7 bytes more than the file holds
  const std::string err = ErrorOf([&] { Download(api, o); });
  EXPECT_NE(err.find("X-Linked-Size"), std::string::npos) << err;
  ExpectNothingPlaced("tq/llama-21m", "model.safetensors");
  hub_.Reset();
  hub_.size_skew = -7;  // the listing says less: the body overruns it
  o.include = {"config.json"};
  EXPECT_NE(ErrorOf([&] { Download(api, o); }).find("more than the"), std::string::npos);
  ExpectNothingPlaced("tq/llama-21m", "config.json");
  hub_.Reset();
  hub_.short_body = true;  // Content-Length promises a byte that never comes
  o.retries = 0;
  EXPECT_NE(ErrorOf([&] { Download(api, o); }).find("run again to resume"), std::string::npos);
  ExpectNothingPlaced("tq/llama-21m", "config.json");
  // The next attempt asks for the rest, hears 416 (nothing more), and verifies what it has.
  o.retries = 1;
  const DownloadResult r = Download(api, o);
  EXPECT_EQ(ReadFileToString((fs::path(r.snapshot_dir) / "config.json").string()),
            ReadFileToString(model_ + "/config.json"));
}

TEST_F(HubDownload, GatedRepositoriesNeedAToken) {
  HubApi anonymous = Api();
  const std::string err = ErrorOf([&] { Download(anonymous, Opts("tq/gated")); });
  EXPECT_NE(err.find("[hub tq/gated]"), std::string::npos) << err;
  EXPECT_NE(err.find("401"), std::string::npos) << err;
  EXPECT_NE(err.find("gated or private"), std::string::npos) << err;
  EXPECT_NE(err.find("HF_TOKEN"), std::string::npos) << err;
  HubApi wrong = Api("hf_wrong");
  EXPECT_NE(ErrorOf([&] { Download(wrong, Opts("tq/gated")); }).find("has no access"),
            std::string::npos);
  HubApi good = Api(FakeHub::kToken);
  const DownloadResult r = Download(good, Opts("tq/gated"));
  EXPECT_TRUE(fs::exists(fs::path(r.snapshot_dir) / "model.safetensors"));
}

TEST_F(HubDownload, MissingRepositoriesAndRevisions) {
  HubApi api = Api();
  EXPECT_NE(ErrorOf([&] { Download(api, Opts("tq/none")); }).find("404"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { Download(api, Opts("tq/llama-21m@v9")); }).find("revision 'v9'"),
            std::string::npos);
}

TEST_F(HubDownload, HostileServerAnswers) {
  HubApi api = Api();
  hub_.truncate_api = 100;
  EXPECT_NE(ErrorOf([&] { Download(api, Opts("tq/llama-21m")); }).find("invalid JSON"),
            std::string::npos);
  hub_.Reset();
  hub_.redirect_loop = true;
  const std::string err = ErrorOf([&] { Download(api, Opts("tq/llama-21m")); });
  EXPECT_NE(err.find("redirects"), std::string::npos) << err;
  // Nothing is listening: a clear transport error.
  HubApi nowhere(HubAccess{"http://127.0.0.1:1", "", ""}, {});
  EXPECT_NE(ErrorOf([&] { nowhere.Revision(*ParseHubId("a/b")); }).find("cannot connect"),
            std::string::npos);
}

TEST(RepoInfo, RejectsHostileListings) {
  const std::string sha(40, 'a');
  auto fails = [&](const std::string& json, const std::string& want) {
    try {
      ParseRepoInfo(json, "listing");
      ADD_FAILURE() << json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  fails("", "invalid JSON");
  fails("{\"sha\": \"" + sha, "invalid JSON");
  fails("[]", "expected a JSON object");
  fails("{}", "'sha'");
  fails(R"({"sha": "abc", "siblings": []})", "not a 40-hex commit");
  fails("{\"sha\": \"" + sha + "\"}", "'siblings'");
  fails("{\"sha\": \"" + sha + "\", \"siblings\": {}}", "expected a list");
  fails("{\"sha\": \"" + sha + "\", \"siblings\": [3]}", "expected an object");
  fails("{\"sha\": \"" + sha + "\", \"siblings\": [{}]}", "'rfilename'");
  for (const char* path : {"../x", "/etc/passwd", "a/../b", "a//b", "a/", "."})
    fails("{\"sha\": \"" + sha + "\", \"siblings\": [{\"rfilename\": \"" + path + "\"}]}",
          "not a safe relative path");
  fails("{\"sha\": \"" + sha + "\", \"siblings\": [{\"rfilename\": \"a\", \"size\": -1}]}",
        "negative");
  fails("{\"sha\": \"" + sha + "\", \"siblings\": [{\"rfilename\": \"a\", \"size\": \"x\"}]}",
        "'size'");
  fails(
      "{\"sha\": \"" + sha + "\", \"siblings\": [{\"rfilename\": \"a\"}, {\"rfilename\": \"a\"}]}",
      "listed twice");
  fails(
      "{\"sha\": \"" + sha +
          "\", \"siblings\": [{\"rfilename\": \"a\", \"size\": 5, \"lfs\": {\"sha256\": \"00\"}}]}",
      "64 hex");
  fails("{\"sha\": \"" + sha +
            "\", \"siblings\": [{\"rfilename\": \"a\", \"size\": 5, \"lfs\": "
            "{\"sha256\": \"" +
            std::string(64, 'b') + "\", \"size\": 6}}]}",
        "disagrees");
  const RepoInfo ok =
      ParseRepoInfo("{\"sha\": \"" + sha +
                        "\", \"siblings\": [{\"rfilename\": \"d/a.bin\", \"size\": 5, "
                        "\"blobId\": \"" +
                        sha + "\"}]}",
                    "listing");
  ASSERT_EQ(ok.files.size(), 1u);
  EXPECT_EQ(ok.files[0].etag(), sha);
}

}  // namespace
}  // namespace tq::hub
