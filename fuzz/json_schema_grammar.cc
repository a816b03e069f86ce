// libFuzzer target: the grammar engine on arbitrary schemas and partial outputs. The input is
// "<schema JSON>\n<output bytes>": the schema is compiled (a SchemaError is fine), then the output
// is walked byte by byte; at each step the state's next-byte set must agree with Advance, and a
// complete output must parse as JSON.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string schema_text = in.substr(0, nl);
  const std::string output = nl == std::string::npos ? "" : in.substr(nl + 1, 512);
  auto schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return 0;
  tq::grammar::Grammar g;
  try {
    g = tq::grammar::SchemaGrammar(schema);
  } catch (const tq::Error&) {
    return 0;
  }
  tq::grammar::GrammarState s = tq::grammar::GrammarState::Start(g);
  std::string walked;
  for (unsigned char c : output) {
    const bool expect = s.NextBytes(g).Has(c);
    tq::grammar::GrammarState next = s.Advance(g, c);
    if (expect == next.dead()) __builtin_trap();  // NextBytes and Advance disagree
    if (next.dead()) break;
    walked.push_back(char(c));
    s = std::move(next);
  }
  if (s.complete() && !walked.empty()) {
    // Bytes >= 0x80 are accepted in strings without UTF-8 checks, and \u escapes without
    // surrogate pairing (as JSON's grammar does; nlohmann rejects lone surrogates): parse only
    // the walks without either.
    bool plain = walked.find("\\u") == std::string::npos;
    for (unsigned char c : walked) plain = plain && c < 0x80;
    if (plain) {
      try {
        (void)nlohmann::json::parse(walked);
      } catch (const nlohmann::json::out_of_range&) {
        // A number beyond double (8e649685) is valid JSON nlohmann cannot hold.
      } catch (const nlohmann::json::exception&) {
        __builtin_trap();  // the grammar accepted text that is not JSON
      }
    }
  }
  return 0;
}
