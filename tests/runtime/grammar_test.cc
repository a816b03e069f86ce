// The grammar engine: JSON Schema features accepted and rejected byte by byte, unsupported
// keywords named, token masks equal to a brute-force check of every token.
#include <gtest/gtest.h>

#include <random>

#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/matcher.h"
#include "runtime/grammar/token_mask.h"

namespace tq::grammar {
namespace {

using json = nlohmann::ordered_json;

bool Matches(const Grammar& g, const std::string& text) {
  GrammarState s = GrammarState::Start(g).Advance(g, text);
  return s.complete();
}
// A prefix of some sentence (not dead).
bool Viable(const Grammar& g, const std::string& text) {
  return !GrammarState::Start(g).Advance(g, text).dead();
}

Grammar Schema(const char* text) { return SchemaGrammar(json::parse(text)); }

TEST(Grammar, AnyJsonObject) {
  const Grammar g = JsonObjectGrammar();
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_TRUE(Matches(g, R"({"a": 1, "b": [true, null, -2.5e3, "x\"y\u00e9"], "c": {}})"));
  EXPECT_TRUE(Matches(g, "{\n  \"a\": {\n    \"b\": []\n  }\n}"));
  EXPECT_FALSE(Matches(g, "[]"));                // not an object
  EXPECT_FALSE(Viable(g, " {}"));                // no leading whitespace
  EXPECT_FALSE(Viable(g, R"({"a": 01})"));       // leading zero
  EXPECT_FALSE(Viable(g, R"({"a": "\q"})"));     // bad escape
  EXPECT_FALSE(Viable(g, "{\"a\": \"x\ny\"}"));  // raw control character in a string
  EXPECT_FALSE(Viable(g, R"({"a" 1})"));
  EXPECT_FALSE(Viable(g, R"({"a": 1,})"));                  // trailing comma
  EXPECT_FALSE(Viable(g, "{\"a\":                   1}"));  // whitespace is bounded
  EXPECT_TRUE(Viable(g, R"({"a": [1, 2)"));
  EXPECT_FALSE(Matches(g, R"({"a": [1, 2)"));
  EXPECT_FALSE(Viable(g, "{}x"));  // nothing after the value
}

TEST(Grammar, ObjectPropertiesRequiredAndOptional) {
  const Grammar g = Schema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array",
      "items": {"type": "string"}}}, "required": ["name"], "additionalProperties": false})");
  EXPECT_TRUE(Matches(g, R"({"name": "Ada"})"));
  EXPECT_TRUE(Matches(g, R"({"name": "Ada", "age": 36})"));
  EXPECT_TRUE(Matches(g, R"({"name": "Ada", "tags": ["x", "y"]})"));
  EXPECT_TRUE(Matches(g, R"({"name":"Ada","age":36,"tags":[]})"));
  EXPECT_FALSE(Matches(g, R"({})"));                          // name is required
  EXPECT_FALSE(Viable(g, R"({"age": 36)"));                   // order: name first
  EXPECT_FALSE(Viable(g, R"({"name": "Ada", "extra": 1})"));  // no other keys
  EXPECT_FALSE(Viable(g, R"({"name": 3})"));
  EXPECT_FALSE(Viable(g, R"({"name": "Ada", "age": 3.5})"));  // integer
  EXPECT_FALSE(Viable(g, R"({"name": "Ada", "age": 1, "age": 2})"));
}

TEST(Grammar, ScalarsEnumConstAnyOfTypeLists) {
  EXPECT_TRUE(Matches(Schema(R"({"type": "number"})"), "-0.5E+10"));
  EXPECT_FALSE(Matches(Schema(R"({"type": "number"})"), "1."));
  EXPECT_TRUE(Matches(Schema(R"({"type": "boolean"})"), "false"));
  EXPECT_FALSE(Viable(Schema(R"({"type": "boolean"})"), "no"));
  EXPECT_TRUE(Matches(Schema(R"({"type": "null"})"), "null"));
  const Grammar e = Schema(R"({"enum": ["red", "green", 3, null]})");
  EXPECT_TRUE(Matches(e, R"("green")"));
  EXPECT_TRUE(Matches(e, "3"));
  EXPECT_TRUE(Matches(e, "null"));
  EXPECT_FALSE(Viable(e, R"("blue")"));
  EXPECT_TRUE(Matches(Schema(R"({"const": {"a": 1}})"), R"({"a":1})"));
  const Grammar a = Schema(R"({"anyOf": [{"type": "integer"}, {"type": "string"}]})");
  EXPECT_TRUE(Matches(a, "12"));
  EXPECT_TRUE(Matches(a, R"("12")"));
  EXPECT_FALSE(Viable(a, "true"));
  const Grammar t = Schema(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(Matches(t, "null"));
  EXPECT_TRUE(Matches(t, R"("x")"));
  EXPECT_FALSE(Viable(t, "1"));
}

TEST(Grammar, ArraysWithBounds) {
  const Grammar g = Schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1,
                               "maxItems": 3})");
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_TRUE(Matches(g, "[1]"));
  EXPECT_TRUE(Matches(g, "[1, 2, 3]"));
  EXPECT_FALSE(Viable(g, "[1, 2, 3, 4"));
  EXPECT_FALSE(Viable(g, R"(["a"])"));
  EXPECT_TRUE(Matches(Schema(R"({"type": "array"})"), R"([1, "a", {}])"));
}

TEST(Grammar, DefsRefsAndRecursion) {
  const Grammar g = Schema(R"({"$defs": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(Matches(g, R"({"value": 1})"));
  EXPECT_TRUE(
      Matches(g, R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})"));
  EXPECT_FALSE(Viable(g, R"({"value": 1, "children": [{"children": [])"));
  const Grammar root = Schema(R"({"type": "object", "properties": {"next": {"anyOf": [
      {"$ref": "#"}, {"type": "null"}]}}, "required": ["next"]})");
  EXPECT_TRUE(Matches(root, R"({"next": {"next": null}})"));
  EXPECT_TRUE(
      Matches(Schema(R"({"definitions": {"x": {"type": "string"}}, "$ref": "#/definitions/x"})"),
              R"("s")"));
}

TEST(Grammar, UnsupportedKeywordsAreNamed) {
  struct Case {
    const char* schema;
    const char* keyword;
    const char* where;
  } cases[] = {
      {R"({"type": "string", "pattern": "^a"})", "pattern", ""},
      {R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}})", "minimum",
       "properties.age"},
      {R"({"oneOf": [{"type": "string"}]})", "oneOf", ""},
      {R"({"type": "object", "properties": {"a": {}}, "additionalProperties": true})",
       "additionalProperties", ""},
      {R"({"$ref": "#/components/x"})", "$ref", ""},
      {R"({"type": "object", "properties": {}, "required": ["zz"]})", "required", ""},
      {R"({"type": "array", "maxItems": 100000})", "maxItems", ""},
      {R"({"type": "strange"})", "type", ""},
      {R"({"enum": []})", "enum", ""},
  };
  for (const Case& c : cases) {
    try {
      SchemaGrammar(json::parse(c.schema));
      ADD_FAILURE() << "accepted " << c.schema;
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), c.keyword) << c.schema << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.where), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(SchemaGrammar(json::parse("3")), SchemaError);
  EXPECT_THROW(SchemaGrammar(json::parse("false")), SchemaError);
}

TEST(Grammar, HostileRecursionDoesNotHang) {
  // A reference that recurses without consuming a byte: the matcher drops the runaway stacks.
  const Grammar g = Schema(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})");
  EXPECT_TRUE(Matches(g, "null"));
}

// A toy vocabulary: single characters, some multi-byte pieces, a special token.
std::shared_ptr<Vocabulary> ToyVocab() {
  std::vector<std::string> t = {"</s>", "<tool>", "{",  "}",   "\"",  ":",   ",",   " ",
                                "a",    "b",      "1",  "12",  "{\"", "\":", "\",", "ab",
                                "true", "tr",     "\n", "\"}", "x",   "ue"};
  std::vector<bool> special(t.size(), false);
  special[0] = special[1] = true;
  return std::make_shared<Vocabulary>(t, special);
}

// max_states: the interned-state graph's bound; 3 forces the copy-walk fallback on most masks.
void CheckMasksEqualBruteForce(size_t max_states) {
  auto vocab = ToyVocab();
  auto g = std::make_shared<Grammar>(SchemaGrammar(json::parse(
      R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
          "required": ["a"]})")));
  TokenMasker masker(g, vocab, max_states);
  std::mt19937 rng(7);
  GrammarState s = masker.Start();
  for (int step = 0; step < 40 && s.can_continue(); ++step) {
    auto bits = masker.Mask(s);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const bool brute = !masker.Accept(s, id).dead();
      EXPECT_EQ(TokenAllowed(*bits, id), brute)
          << "token '" << vocab->bytes(id) << "' step " << step << " max_states " << max_states;
      if (brute) allowed.push_back(id);
    }
    ASSERT_FALSE(allowed.empty());
    EXPECT_FALSE(TokenAllowed(*bits, 0));  // special tokens not named by the grammar
    s = masker.Accept(s, allowed[rng() % allowed.size()]);
  }
  EXPECT_GT(masker.stats().lookups, masker.stats().misses - 1);
}

TEST(TokenMask, EqualsBruteForceOverTheVocabulary) {
  CheckMasksEqualBruteForce(TokenMasker::kMaxInternedStates);
}

TEST(TokenMask, EqualsBruteForceWhenTheStateGraphOverflows) { CheckMasksEqualBruteForce(3); }

TEST(TokenMask, NamedSpecialTokensAndCaching) {
  auto vocab = ToyVocab();
  GrammarBuilder b;
  JsonSchemaCompiler c(b);
  Sequence seq = GrammarBuilder::Literal("<tool>");
  seq.push_back(Symbol::Rule(c.AnyObject()));
  auto g = std::make_shared<Grammar>(b.Build(b.RuleOf("root", {seq}), {"<tool>"}));
  TokenMasker masker(g, vocab);
  auto m = masker.Mask(masker.Start());
  EXPECT_TRUE(TokenAllowed(*m, 1));   // the named special token
  EXPECT_FALSE(TokenAllowed(*m, 0));  // </s>
  EXPECT_FALSE(TokenAllowed(*m, 2));
  masker.Mask(masker.Start());
  EXPECT_EQ(masker.stats().lookups, 2);
  EXPECT_EQ(masker.stats().misses, 1);
}

// Random schemas from the subset and random byte strings: the matcher never crashes, a sentence
// generated by walking allowed bytes is accepted, and the JSON it yields parses.
TEST(Grammar, RandomWalksProduceParsableJson) {
  std::mt19937 rng(11);
  const char* schemas[] = {
      R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}},
          "b": {"enum": ["x", "y"]}, "c": {"anyOf": [{"type": "null"}, {"type": "integer"}]}},
          "required": ["a", "c"]})",
      R"({"type": "array", "items": {"type": "object"}, "maxItems": 2})", R"({})"};
  for (const char* text : schemas) {
    const Grammar g = Schema(text);
    for (int trial = 0; trial < 30; ++trial) {
      GrammarState s = GrammarState::Start(g);
      std::string out;
      for (int i = 0; i < 400 && s.can_continue(); ++i) {
        if (s.complete() && rng() % 4 == 0) break;
        const ByteSet next = s.NextBytes(g);
        std::vector<uint8_t> opts;
        for (int byte = 0; byte < 128; ++byte)  // ASCII keeps the output valid UTF-8
          if (next.Has(uint8_t(byte))) opts.push_back(uint8_t(byte));
        if (opts.empty()) break;
        // Prefer closing brackets and quotes so walks end.
        uint8_t pick = opts[rng() % opts.size()];
        for (uint8_t o : opts)
          if ((o == '}' || o == ']' || o == '"') && rng() % 2) pick = o;
        out.push_back(char(pick));
        s = s.Advance(g, pick);
        ASSERT_FALSE(s.dead()) << out;
      }
      if (s.complete()) {
        try {
          EXPECT_FALSE(json::parse(out).is_discarded()) << out;
        } catch (const json::out_of_range&) {
          // A number like 8e649685 is valid JSON that nlohmann cannot hold: fine.
        } catch (const json::exception& e) {
          ADD_FAILURE() << out << ": " << e.what();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tq::grammar
