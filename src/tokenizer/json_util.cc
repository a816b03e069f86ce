#include "tokenizer/json_util.h"

#include "tokenizer/unicode.h"

namespace tq::tok {

char32_t GetChar(const Json& j, const char* key, const std::string& where) {
  const std::string s = GetString(j, key, where);
  TQ_CHECK(!s.empty() && IsValidUtf8(s), where, "field '{}' must be one character", key);
  size_t i = 0;
  const char32_t c = NextChar(s, i);
  TQ_CHECK(i == s.size(), where, "field '{}' must be one character, got '{}'", key, s);
  return c;
}

}  // namespace tq::tok
