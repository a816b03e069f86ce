// The one error type of the public API. Its message is the engine's "[where] what" text, the
// same the command line prints (e.g. "[checkpoint /m] missing tensor 'lm_head.weight'").
#pragma once

#include <stdexcept>
#include <string>

#include "turboquant/export.h"

namespace turboquant {

class TQ_API Error : public std::runtime_error {
 public:
  // kUsage: a bad argument or option (the CLI's exit code 2); kFailure: the work failed.
  enum class Kind { kFailure, kUsage };
  Error(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

}  // namespace turboquant
