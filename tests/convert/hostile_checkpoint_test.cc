// Inconsistent or hostile TurboQuant checkpoints give clear errors naming the tensor or field.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "convert_helpers.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/model.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

class HostileCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    Convert(test::Options(test::ModelDir("tq-llama-21m"), dir_->file("good"), 3));
    ConvertOptions e8 = test::Options(test::ModelDir("tq-llama-21m"), dir_->file("good_e8"), 3);
    e8.recipe.scale_format = quant::ScaleFormat::kE8;
    e8.recipe.group_size = 32;
    Convert(e8);
  }
  static void TearDownTestSuite() { delete dir_; }

  // A fresh copy of the good checkpoint to break.
  std::string Copy(const std::string& good = "good") {
    const std::string d = dir_->file("bad" + std::to_string(counter_++));
    fs::copy(dir_->file(good), d);
    for (auto& e : fs::directory_iterator(d))
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    return d;
  }
  void EditConfig(const std::string& d, const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(ReadFileToString(d + "/config.json"));
    edit(j);
    WriteFileAtomic(d + "/config.json", j.dump());
  }
  void EditTensors(const std::string& d, const std::function<void(test::TensorMap&)>& edit) {
    test::TensorMap m = test::ReadTensors(d);
    edit(m);
    test::WriteTensors(d, m);
  }
  static std::string LoadError(const std::string& d) {
    try {
      Model::Load(d);
    } catch (const Error& e) {
      return e.what();
    }
    return "loaded without error";
  }

  static void ExpectErrorMentions(const std::string& d, const std::string& what) {
    const std::string err = LoadError(d);
    EXPECT_NE(err.find(what), std::string::npos) << "error: " << err << "\nexpected: " << what;
  }

  static test::TempDir* dir_;
  static inline int counter_ = 0;
};
test::TempDir* HostileCheckpoint::dir_ = nullptr;

const std::string kDown = "model.layers.1.mlp.down_proj";
const std::string kDownTable = "model.layers.1.mlp_down.scale_table";  // its rotation group's

TEST_F(HostileCheckpoint, GoodOneLoads) { EXPECT_NO_THROW(Model::Load(dir_->file("good"))); }

TEST_F(HostileCheckpoint, WrongCodeShape) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m[kDown + ".codes"];
    t.shape[1] -= 12;
    t.bytes.resize(size_t(t.shape[0] * t.shape[1]));
  });
  ExpectErrorMentions(d, kDown + ".codes");
}

TEST_F(HostileCheckpoint, MissingScales) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) { m.erase(kDown + ".scales"); });
  ExpectErrorMentions(d, kDown + ".scales");
}

TEST_F(HostileCheckpoint, ScalesOfTheWrongDtype) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) { m[kDown + ".scales"].dtype = DType::BF16; });
  ExpectErrorMentions(d, kDown + ".scales");
}

TEST_F(HostileCheckpoint, CodebookOfNoKnownSize) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m[kDown + ".codebook"];
    t.shape = {5};
    t.bytes.resize(20);
  });
  ExpectErrorMentions(d, kDown + ".codebook");
}

TEST_F(HostileCheckpoint, CodebookOfAnotherWidthThanTheCodes) {
  // 16 levels (q4) with codes packed as q3: the codes' row length no longer fits.
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m[kDown + ".codebook"];
    t.shape = {16};
    t.bytes.resize(64);
  });
  ExpectErrorMentions(d, kDown + ".codes");
}

TEST_F(HostileCheckpoint, MissingSigns) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) { m.erase("model.layers.1.mlp_down.signs"); });
  ExpectErrorMentions(d, "model.layers.1.mlp_down.signs");
}

TEST_F(HostileCheckpoint, SignsWithPaddingOrWrongShape) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m["model.layers.1.mlp_down.signs"];
    t.shape = {1, 11 * 16};  // block 1408: not a power of two
  });
  ExpectErrorMentions(d, "model.layers.1.mlp_down.signs");
}

TEST_F(HostileCheckpoint, UnknownFormatVersion) {
  const std::string d = Copy();
  EditConfig(d, [](nlohmann::json& j) { j["quantization"]["format_version"] = 3; });
  ExpectErrorMentions(d, "format_version 3");
}

TEST_F(HostileCheckpoint, VersionOneFilesStillLoad) {
  const std::string d = Copy();
  EditConfig(d, [](nlohmann::json& j) { j["quantization"]["format_version"] = 1; });
  EXPECT_NO_THROW(Model::Load(d));
}

TEST_F(HostileCheckpoint, GoodE8OneLoads) {
  const auto m = test::ReadTensors(dir_->file("good_e8"));
  EXPECT_EQ(m.at(kDown + ".scales").dtype, DType::U8);
  EXPECT_EQ(m.at(kDownTable).shape, (Shape{256}));
  EXPECT_NO_THROW(Model::Load(dir_->file("good_e8")));
}

TEST_F(HostileCheckpoint, E8ScalesInAVersionOneFile) {
  const std::string d = Copy("good_e8");
  EditConfig(d, [](nlohmann::json& j) { j["quantization"]["format_version"] = 1; });
  ExpectErrorMentions(d, "format_version >= 2");
}

TEST_F(HostileCheckpoint, E8ScalesWithoutTheirTable) {
  const std::string d = Copy("good_e8");
  EditTensors(d, [](test::TensorMap& m) { m.erase(kDownTable); });
  ExpectErrorMentions(d, "missing tensor '" + kDownTable + "'");
}

TEST_F(HostileCheckpoint, E8TableOfTheWrongShapeOrDtype) {
  std::string d = Copy("good_e8");
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m[kDownTable];
    t.shape = {128};
    t.bytes.resize(512);
  });
  ExpectErrorMentions(d, kDownTable);
  d = Copy("good_e8");
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m[kDownTable];
    t.dtype = DType::F16;
    t.shape = {512};
  });
  ExpectErrorMentions(d, kDownTable);
}

TEST_F(HostileCheckpoint, E8TableWithNegativeOrNonFiniteEntries) {
  for (float bad :
       {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::string d = Copy("good_e8");
    EditTensors(d, [&](test::TensorMap& m) {
      auto& t = m[kDownTable];
      std::memcpy(t.bytes.data() + 4 * 200, &bad, 4);
    });
    ExpectErrorMentions(d, kDownTable);
    ExpectErrorMentions(d, "entry 200");
  }
}

TEST_F(HostileCheckpoint, E8TableNamedByTheBlockMustExist) {
  const std::string d = Copy("good_e8");
  EditConfig(d, [](nlohmann::json& j) {
    j["quantization"]["tensors"][kDown]["scale_table"] = "no.such.table";
  });
  ExpectErrorMentions(d, "missing tensor 'no.such.table'");
  EditConfig(d, [](nlohmann::json& j) { j["quantization"]["tensors"][kDown]["scale_table"] = 7; });
  ExpectErrorMentions(d, "quantization.tensors." + kDown + ".scale_table");
}

TEST_F(HostileCheckpoint, E8ScalesOfTheWrongShape) {
  const std::string d = Copy("good_e8");
  EditTensors(d, [](test::TensorMap& m) {
    auto& t = m[kDown + ".scales"];
    t.shape = {t.shape[0], 3};  // 3 groups do not divide 1408
    t.bytes.resize(size_t(t.shape[0] * 3));
  });
  ExpectErrorMentions(d, kDown + ".scales");
}

TEST_F(HostileCheckpoint, TableNextToFp16Scales) {
  const std::string d = Copy();
  const auto e8 = test::ReadTensors(dir_->file("good_e8"));
  EditTensors(d, [&](test::TensorMap& m) { m[kDown + ".scale_table"] = e8.at(kDownTable); });
  ExpectErrorMentions(d, kDown + ".scale_table");
}

TEST_F(HostileCheckpoint, E8ScalesWithAffineMins) {
  const std::string d = Copy("good_e8");
  EditTensors(d, [](test::TensorMap& m) {
    test::RawTensor mins{DType::F16, m[kDown + ".scales"].shape, {}};
    mins.bytes.resize(size_t(mins.shape[0] * mins.shape[1] * 2));
    m[kDown + ".mins"] = mins;
    m.erase(kDown + ".codebook");
  });
  ExpectErrorMentions(d, kDown);
}

TEST_F(HostileCheckpoint, UnknownMode) {
  const std::string d = Copy();
  EditConfig(d, [](nlohmann::json& j) { j["quantization"]["mode"] = "gptq"; });
  ExpectErrorMentions(d, "quantization.mode");
}

TEST_F(HostileCheckpoint, NoQuantizationBlock) {
  const std::string d = Copy();
  EditConfig(d, [](nlohmann::json& j) { j.erase("quantization"); });
  ExpectErrorMentions(d, "quantization block");
}

TEST_F(HostileCheckpoint, TensorMissingFromTheBlock) {
  const std::string d = Copy();
  EditConfig(d, [](nlohmann::json& j) { j["quantization"]["tensors"].erase(kDown); });
  ExpectErrorMentions(d, kDown);
}

TEST_F(HostileCheckpoint, RotatedEmbedding) {
  const std::string d = Copy();
  EditConfig(d, [](nlohmann::json& j) {
    j["quantization"]["tensors"]["model.embed_tokens"]["rotation_group"] = "model.layers.0.attn_in";
  });
  ExpectErrorMentions(d, "model.embed_tokens");
}

TEST_F(HostileCheckpoint, BothCodebookAndMins) {
  const std::string d = Copy();
  EditTensors(d, [](test::TensorMap& m) { m[kDown + ".mins"] = m[kDown + ".scales"]; });
  ExpectErrorMentions(d, kDown);
}

}  // namespace
}  // namespace tq
