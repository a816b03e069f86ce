// A converted checkpoint truncated or modified at any byte is refused by doctor (structure,
// quantization map, CRC-32C of every shard) and never crashes the loader: a change in the header
// is a load error naming the file; a change inside tensor data is found by doctor's checksums
// (the loader maps the data, it does not hash it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "convert/convert.h"
#include "convert_helpers.h"
#include "core/error.h"
#include "model/model.h"
#include "runtime/doctor/doctor.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;

class FaultInjection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    Convert(test::Options(test::ModelDir("tq-llama-21m"), dir_->file("good"), 3));
    size_ = fs::file_size(dir_->file("good/model.safetensors"));
    uint8_t len[8];
    const int fd = ::open(dir_->file("good/model.safetensors").c_str(), O_RDONLY);
    ASSERT_EQ(::pread(fd, len, 8, 0), 8);
    ::close(fd);
    header_end_ = 8;
    for (int i = 0; i < 8; ++i) header_end_ += uint64_t(len[i]) << (8 * i);
  }
  static void TearDownTestSuite() { delete dir_; }

  // A copy of the good checkpoint with its shard passed through `edit(fd)`.
  std::string Broken(const std::function<void(int fd)>& edit) {
    const std::string d = dir_->file("bad" + std::to_string(counter_++));
    fs::copy(dir_->file("good"), d);
    for (auto& e : fs::directory_iterator(d))
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    const int fd = ::open((d + "/model.safetensors").c_str(), O_RDWR);
    edit(fd);
    ::close(fd);
    return d;
  }
  static bool DoctorRefuses(const std::string& d, std::string* text) {
    DoctorOptions o;
    o.model_dir = d;
    o.ram_gb = 64;
    const DoctorReport r = RunDoctor(o);
    *text = DoctorToText(r);
    return !r.ok();
  }
  // Load must throw tq::Error or succeed; anything else (a crash, another exception) fails.
  static bool LoadRefuses(const std::string& d) {
    try {
      Model::Load(d);
      return false;
    } catch (const Error&) {
      return true;
    }
  }
  // Offsets to hit: every byte of the length prefix, the header's first, middle and last bytes,
  // the first data bytes and a spread over the rest.
  static std::vector<uint64_t> Offsets() {
    std::vector<uint64_t> v = {0,
                               1,
                               2,
                               3,
                               4,
                               5,
                               6,
                               7,
                               8,
                               9,
                               header_end_ / 2,
                               header_end_ - 2,
                               header_end_ - 1,
                               header_end_,
                               header_end_ + 1,
                               size_ - 1};
    std::mt19937_64 rng(21);
    for (int i = 0; i < 12; ++i) v.push_back(header_end_ + rng() % (size_ - header_end_));
    return v;
  }

  static test::TempDir* dir_;
  static uint64_t size_, header_end_;
  static int counter_;
};
test::TempDir* FaultInjection::dir_ = nullptr;
uint64_t FaultInjection::size_ = 0, FaultInjection::header_end_ = 0;
int FaultInjection::counter_ = 0;

TEST_F(FaultInjection, GoodOneIsHealthy) {
  std::string text;
  EXPECT_FALSE(DoctorRefuses(dir_->file("good"), &text)) << text;
  EXPECT_NE(text.find("checksums"), std::string::npos) << text;
  EXPECT_FALSE(LoadRefuses(dir_->file("good")));
}

TEST_F(FaultInjection, TruncatedAnywhereIsRefusedByDoctorAndLoad) {
  for (const uint64_t at : Offsets()) {
    if (at >= size_) continue;
    const std::string d = Broken([&](int fd) { ASSERT_EQ(::ftruncate(fd, off_t(at)), 0); });
    std::string text;
    EXPECT_TRUE(DoctorRefuses(d, &text)) << "truncated at " << at << "\n" << text;
    EXPECT_TRUE(LoadRefuses(d)) << "truncated at " << at;
    fs::remove_all(d);
  }
}

TEST_F(FaultInjection, ModifiedAnywhereIsRefusedByDoctorAndNeverCrashesLoad) {
  for (const uint64_t at : Offsets()) {
    const std::string d = Broken([&](int fd) {
      uint8_t b = 0;
      ASSERT_EQ(::pread(fd, &b, 1, off_t(at)), 1);
      b ^= 0x5a;
      ASSERT_EQ(::pwrite(fd, &b, 1, off_t(at)), 1);
    });
    std::string text;
    EXPECT_TRUE(DoctorRefuses(d, &text)) << "byte " << at << " modified\n" << text;
    // Load either refuses (a header, a codebook, a table or signs that no longer check out) or
    // maps data it does not hash; it must never crash.
    (void)LoadRefuses(d);
    fs::remove_all(d);
  }
}

TEST_F(FaultInjection, ExtendedFileIsRefusedByDoctor) {
  const std::string d = Broken([&](int fd) { ASSERT_EQ(::ftruncate(fd, off_t(size_ + 64)), 0); });
  std::string text;
  EXPECT_TRUE(DoctorRefuses(d, &text)) << text;
  EXPECT_NE(text.find("truncated or extended"), std::string::npos) << text;
}

}  // namespace
}  // namespace tq
