// Python's json.dumps() for Jinja values, as Hugging Face's `tojson` filter calls it
// (ensure_ascii=False, sort_keys=False by default; key order as inserted).
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace tq::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // Python indent=N -> N spaces; nullopt -> one line
  std::string item_separator = ", ";  // Python uses "," when indent is given
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// ThrowRender("Object of type X is not JSON serializable") for undefined, namespaces, functions.
std::string PyJsonDumps(const Value& v, const JsonDumpOptions& options);

}  // namespace tq::jinja
