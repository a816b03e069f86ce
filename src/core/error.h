// Errors: every failure is an exception whose message reads "[where] what", where `where` names
// the operation, file or tensor (e.g. "[safetensors model.safetensors: tensor 'x'] ...").
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace tq {

class Error : public std::runtime_error {
 public:
  Error(std::string_view where, std::string_view what)
      : std::runtime_error(fmt::format("[{}] {}", where, what)) {}
};

// A usage error (bad flags, bad arguments): the CLI maps it to exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void Fail(std::string_view where, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(where, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tq

// TQ_CHECK(cond, where, fmt, args...): throws tq::Error("[where] message") when cond is false.
#define TQ_CHECK(cond, where, ...)               \
  do {                                           \
    if (!(cond)) ::tq::Fail(where, __VA_ARGS__); \
  } while (0)
