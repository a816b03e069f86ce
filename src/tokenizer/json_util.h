// Typed access to tokenizer.json fields: a missing or mistyped field is a tq::Error naming the
// file and the component ("[tokenizer.json: pre_tokenizer] field 'behavior' ...").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace tq::tok {

using Json = nlohmann::json;

inline const Json& Field(const Json& j, const char* key, const std::string& where) {
  TQ_CHECK(j.is_object(), where, "expected an object, got {}", j.type_name());
  auto it = j.find(key);
  TQ_CHECK(it != j.end(), where, "missing field '{}'", key);
  return *it;
}

inline std::string GetString(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  TQ_CHECK(v.is_string(), where, "field '{}' must be a string, got {}", key, v.type_name());
  return v.get<std::string>();
}

// A string field that may be absent or null.
inline std::string GetStringOr(const Json& j, const char* key, const std::string& fallback,
                               const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  TQ_CHECK(it->is_string(), where, "field '{}' must be a string, got {}", key, it->type_name());
  return it->get<std::string>();
}

inline bool GetBoolOr(const Json& j, const char* key, bool fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  TQ_CHECK(it->is_boolean(), where, "field '{}' must be a boolean, got {}", key, it->type_name());
  return it->get<bool>();
}

inline int64_t GetIntOr(const Json& j, const char* key, int64_t fallback,
                        const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  TQ_CHECK(it->is_number_integer(), where, "field '{}' must be an integer, got {}", key,
           it->type_name());
  return it->get<int64_t>();
}

inline const Json& GetArray(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  TQ_CHECK(v.is_array(), where, "field '{}' must be an array, got {}", key, v.type_name());
  return v;
}

// The component's "type" tag.
inline std::string TypeOf(const Json& j, const std::string& where) {
  return GetString(j, "type", where);
}

// Bounds the nesting of Sequence components (a hostile file must not exhaust the stack).
class NestingGuard {
 public:
  explicit NestingGuard(const std::string& where) {
    TQ_CHECK(++depth() <= kMaxDepth, where, "components nested deeper than {}", kMaxDepth);
  }
  ~NestingGuard() { --depth(); }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  static constexpr int kMaxDepth = 64;
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

// A single Unicode character given as a JSON string (Metaspace replacement, Strip content).
char32_t GetChar(const Json& j, const char* key, const std::string& where);

}  // namespace tq::tok
