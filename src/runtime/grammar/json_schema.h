// JSON Schema -> Grammar, for structured output (response_format) and tool arguments. The subset
// is the one OpenAI's structured outputs accept: type (one or a list), properties + required
// (properties appear in schema order; additionalProperties must be absent or false), items,
// minItems / maxItems, enum, const, anyOf, $defs / definitions with $ref ("#", "#/$defs/X",
// "#/definitions/X", recursion allowed), nesting; annotations (description, title, default,
// examples, $schema, $id, $comment) are ignored. Any other keyword is a SchemaError naming it
// and where it sits, so the server can answer 400 instead of silently ignoring a constraint.
//
// The JSON the grammar accepts: no whitespace at the start or the end; between tokens at most one
// space, or one newline followed by up to 16 spaces (enough for pretty-printing, not enough
// for a model to spin in whitespace forever).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "runtime/grammar/grammar.h"

namespace tq::grammar {

class SchemaError : public tq::Error {
 public:
  // `path`: where in the schema ("properties.age"); `keyword`: the unsupported keyword, if any.
  SchemaError(const std::string& path, const std::string& keyword, const std::string& what)
      : tq::Error("json schema" + (path.empty() ? "" : " at " + path), what), keyword_(keyword) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

// Compiles schemas into rules of a GrammarBuilder (several schemas can share one builder: the
// tool-call grammars put each tool's parameters into one grammar).
class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(GrammarBuilder& b);

  // A rule matching one JSON value valid under `schema` (whose "#" references resolve against
  // `root`, normally the schema itself). `path` prefixes error locations.
  uint32_t Compile(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& root,
                   const std::string& path);
  // Any JSON value / any JSON object.
  uint32_t AnyValue();
  uint32_t AnyObject();
  // Optional whitespace between tokens (see above).
  uint32_t Ws();
  uint32_t String();

 private:
  uint32_t CompileTyped(const nlohmann::ordered_json& schema, const std::string& type,
                        const nlohmann::ordered_json& root, const std::string& path);
  uint32_t Object(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& root,
                  const std::string& path);
  uint32_t Array(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& root,
                 const std::string& path);
  uint32_t Ref(const std::string& ref, const nlohmann::ordered_json& root, const std::string& path);
  uint32_t Number();
  uint32_t Integer();
  uint32_t LiteralRule(const std::string& name, const std::string& text);

  GrammarBuilder& b_;
  int64_t counter_ = 0;
  uint32_t ws_ = UINT32_MAX, string_ = UINT32_MAX, number_ = UINT32_MAX, integer_ = UINT32_MAX;
  uint32_t value_ = UINT32_MAX, object_ = UINT32_MAX;
  std::map<std::string, uint32_t> refs_;  // "#/$defs/X" -> its rule
};

// A grammar for one value under `schema` (root rule: the value, nothing around it).
Grammar SchemaGrammar(const nlohmann::ordered_json& schema);
// response_format {"type": "json_object"}: any JSON object.
Grammar JsonObjectGrammar();

}  // namespace tq::grammar
