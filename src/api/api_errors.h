// Internal: every public entry point runs its body through Translate, so an engine error leaves
// the library as turboquant::Error with the same "[where] what" message.
#pragma once

#include <exception>
#include <new>
#include <utility>

#include "core/error.h"
#include "turboquant/error.h"

namespace turboquant::detail {

template <typename F>
auto Translate(F&& body) -> decltype(body()) {
  try {
    return std::forward<F>(body)();
  } catch (const turboquant::Error&) {
    throw;
  } catch (const tq::UsageError& e) {
    throw Error(Error::Kind::kUsage, e.what());
  } catch (const tq::Error& e) {
    throw Error(Error::Kind::kFailure, e.what());
  } catch (const std::bad_alloc&) {
    throw Error(Error::Kind::kFailure, "[turboquant] out of memory");
  } catch (const std::exception& e) {
    throw Error(Error::Kind::kFailure, std::string("[turboquant] ") + e.what());
  }
}

}  // namespace turboquant::detail
