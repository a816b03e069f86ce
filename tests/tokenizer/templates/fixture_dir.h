// Where the template fixtures live: next to this header, found from the compiled file's path
// (__FILE__ may be relative to the build directory when ccache rewrites paths).
#pragma once

#include <filesystem>
#include <string>

#include "testutil/testutil.h"

namespace tq::test {

inline std::string TemplateFixtureDir() {
  std::filesystem::path p = std::filesystem::path(__FILE__).parent_path();
  if (p.is_relative()) p = std::filesystem::path(BinaryDir()) / p;
  return RequireFile(p.lexically_normal().string());
}

}  // namespace tq::test
