// doctor on a fresh conversion warns about nothing, and fails on any mismatch between a
// converted checkpoint's tensors and its quantization map (config.json quantization.tensors).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "core/mapped_file.h"
#include "runtime/doctor/doctor.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

class DoctorMap : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    for (const bool e8 : {false, true}) {
      ConvertOptions o;
      o.model_dir = test::ModelDir("tq-llama-21m");
      o.out_dir = dir_->file(e8 ? "e8" : "f16");
      o.recipe.bits = 3;
      o.recipe.group_size = e8 ? 32 : 64;
      o.recipe.embed_bits = 8;
      if (e8) o.recipe.scale_format = quant::ScaleFormat::kE8;
      o.scale = quant::ScaleMode::kRms;
      o.progress = false;
      Convert(o);
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static DoctorReport Doctor(const std::string& dir) {
    DoctorOptions o;
    o.model_dir = dir;
    o.ram_gb = 64;
    return RunDoctor(o);
  }
  // A copy of a good conversion with its config.json map edited.
  std::string Edited(const std::string& good, const std::function<void(Json&)>& edit) {
    const std::string d = dir_->file("bad" + std::to_string(counter_++));
    fs::copy(dir_->file(good), d);
    for (auto& e : fs::directory_iterator(d))
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    Json j = Json::parse(ReadFileToString(d + "/config.json"));
    edit(j["quantization"]["tensors"]);
    test::WriteFile(d + "/config.json", j.dump(2));
    return d;
  }
  static void ExpectMapFails(const DoctorReport& r, const std::string& needle) {
    bool found = false;
    for (const auto& c : r.checks) {
      if (c.check != "quantization map") continue;
      found = true;
      EXPECT_EQ(c.status, CheckStatus::kFail) << c.hint;
      EXPECT_NE(c.hint.find(needle), std::string::npos) << c.hint;
    }
    EXPECT_TRUE(found) << DoctorToText(r);
    EXPECT_FALSE(r.ok());
  }

  static test::TempDir* dir_;
  static int counter_;
};
test::TempDir* DoctorMap::dir_ = nullptr;
int DoctorMap::counter_ = 0;

const char* kQ = "model.layers.0.self_attn.q_proj";
const char* kDown = "model.layers.2.mlp.down_proj";

TEST_F(DoctorMap, FreshConversionsWarnAboutNothing) {
  for (const char* name : {"f16", "e8"}) {
    const DoctorReport r = Doctor(dir_->file(name));
    for (const auto& c : r.checks) {
      if (c.check == "cpu") continue;  // a CPU without AVX2 is worth a warning anywhere
      EXPECT_EQ(c.status, CheckStatus::kOk) << name << ": " << c.check << ": " << c.hint;
    }
    bool map_checked = false;
    for (const auto& c : r.checks) map_checked |= c.check == "quantization map";
    EXPECT_TRUE(map_checked) << DoctorToText(r);
  }
}

TEST_F(DoctorMap, FormatOfTheMapDiffersFromTheCodes) {
  ExpectMapFails(Doctor(Edited("f16", [](Json& m) { m[kQ]["format"] = "q4"; })),
                 std::string(kQ) + ".codes");
}

TEST_F(DoctorMap, UnknownFormatName) {
  ExpectMapFails(Doctor(Edited("f16", [](Json& m) { m[kQ]["format"] = "q5"; })), "'q5'");
}

TEST_F(DoctorMap, GroupSizeDiffersFromTheScales) {
  ExpectMapFails(Doctor(Edited("f16", [](Json& m) { m[kDown]["group_size"] = 128; })),
                 "group_size 128");
}

TEST_F(DoctorMap, ShapeDiffersFromTheCodes) {
  ExpectMapFails(Doctor(Edited("f16",
                               [](Json& m) {
                                 m[kDown]["shape"] = {512, 1024};
                               })),
                 std::string(kDown) + ".codes");
}

TEST_F(DoctorMap, ScaleKindDiffersFromTheScales) {
  ExpectMapFails(Doctor(Edited("f16", [](Json& m) { m[kQ]["scales"] = "e8"; })),
                 std::string(kQ) + ".scales");
}

TEST_F(DoctorMap, ScaleTableNamedButMissing) {
  ExpectMapFails(Doctor(Edited("e8", [](Json& m) { m[kQ]["scale_table"] = "no.such.table"; })),
                 "no.such.table");
}

TEST_F(DoctorMap, RotationBlockDiffersFromTheSigns) {
  ExpectMapFails(
      Doctor(Edited(
          "f16",
          [](Json& m) { m[kQ]["rotation_block"] = m[kQ]["rotation_block"].get<int64_t>() / 2; })),
      ".signs");
}

TEST_F(DoctorMap, StoredLinearWithoutAnEntry) {
  ExpectMapFails(Doctor(Edited("f16", [](Json& m) { m.erase(kDown); })),
                 "the map has no entry " + std::string(kDown));
}

TEST_F(DoctorMap, EntryWithoutItsTensors) {
  ExpectMapFails(Doctor(Edited("f16", [](Json& m) { m["model.layers.9.mlp.up_proj"] = m[kDown]; })),
                 "model.layers.9.mlp.up_proj.codes is missing");
}

TEST_F(DoctorMap, MapThatIsNotAnObject) {
  const std::string d = Edited("f16", [](Json& m) { m = Json::array(); });
  ExpectMapFails(Doctor(d), "quantization.tensors");
}

}  // namespace
}  // namespace tq
