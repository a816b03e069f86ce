#include "testutil/testutil.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

namespace tq::test {

std::string SharedDir() {
  if (const char* env = std::getenv("TQ_SHARED_DIR"); env && *env) return env;
  return TQ_DEFAULT_SHARED_DIR;
}

std::string ModelDir(const std::string& name) {
  const std::string shared = SharedDir() + "/models/" + name;
  const std::string shipped = std::string(TQ_SOURCE_DIR) + "/models/" + name;
  if (!std::filesystem::exists(shared) && std::filesystem::exists(shipped + "/config.json"))
    return shipped;
  return RequireFile(shared);
}

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci && (std::string(ci) == "true" || std::string(ci) == "1");
}

std::string EvalFile(const std::string& name) { return RequireFile(SharedDir() + "/eval/" + name); }

std::string RequireFile(const std::string& path) {
  if (std::filesystem::exists(path)) return path;
  // Only the shared data may be absent (a fresh clone); anything else missing is a failure.
  if (InCi() || path.rfind(SharedDir(), 0) != 0) {
    ADD_FAILURE() << "required test data is missing: " << path
                  << (InCi() ? " (CI=true: the shared/ folder must be there; set TQ_SHARED_DIR)"
                             : "");
    throw std::runtime_error("missing test data: " + path);
  }
  const std::string why = "skipped: test data not found: " + path +
                          " (no ../shared beside this clone; set TQ_SHARED_DIR to run it)";
  GTEST_MESSAGE_AT_(__FILE__, __LINE__, why.c_str(), ::testing::TestPartResult::kSkip);
  throw ::testing::AssertionException(
      ::testing::TestPartResult(::testing::TestPartResult::kSkip, __FILE__, __LINE__, why.c_str()));
}

std::string BinaryDir() { return TQ_BINARY_DIR; }

TempDir::TempDir() {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int i = 0; i < 100; ++i) {
    auto p = base / ("tq_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temp dir");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), std::streamsize(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace tq::test
