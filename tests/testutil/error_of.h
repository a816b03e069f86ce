// The message of the tq::Error that f() throws; a test failure (and "") when it throws none.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace tq::test {

template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace tq::test
