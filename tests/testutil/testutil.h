// Helpers shared by all tests: where the shared models live, temp dirs, reading reference.json.
#pragma once

#include <filesystem>
#include <string>

namespace tq::test {

// ../shared (or $TQ_SHARED_DIR). Missing data is a test failure, never a silent pass:
// RequireFile() fails the calling test with the path when the file is absent.
std::string SharedDir();
std::string ModelDir(const std::string& name);     // SharedDir()/models/<name>
std::string EvalFile(const std::string& name);     // SharedDir()/eval/<name>
std::string RequireFile(const std::string& path);  // returns path; ADD_FAILURE + throw if missing
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
