// Helpers shared by all tests: where the shared models live, temp dirs, reading reference.json.
#pragma once

#include <filesystem>
#include <string>

namespace tq::test {

// ../shared (or $TQ_SHARED_DIR). Missing data is never a silent pass: RequireFile() on an
// absent file fails the calling test under CI (CI=true), and elsewhere (a fresh clone with no
// ../shared) skips it with the path and the reason printed (GTEST_SKIP semantics: it throws
// testing::AssertionException, which gtest takes as "already reported"). Paths outside
// SharedDir() (the built binary, ...) always fail when missing.
std::string SharedDir();
// SharedDir()/models/<name>; for the models shipped in the repository (models/tq-llama-21m),
// the repository's copy when ../shared lacks it.
std::string ModelDir(const std::string& name);
std::string EvalFile(const std::string& name);     // SharedDir()/eval/<name>
std::string RequireFile(const std::string& path);  // returns path; fail or skip if missing
bool InCi();                                       // $CI is "true" (or "1")
std::string BinaryDir();                           // the CMake build directory

// A fresh temporary directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void WriteFile(const std::string& path, const std::string& data);

}  // namespace tq::test
