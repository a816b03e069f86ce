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
  return RequireFile(SharedDir() + "/models/" + name);
}

std::string EvalFile(const std::string& name) { return RequireFile(SharedDir() + "/eval/" + name); }

std::string RequireFile(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "required test data is missing: " << path
                  << " (set TQ_SHARED_DIR to the shared/ folder)";
    throw std::runtime_error("missing test data: " + path);
  }
  return path;
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
