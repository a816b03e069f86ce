#include "runtime/grammar/json_schema.h"

#include <fmt/format.h>

#include <set>

namespace tq::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxIndent = 16;
constexpr int kMaxBoundedItems = 64;  // maxItems above this is a SchemaError (grammar size)

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"description", "title",    "default",  "examples",
                                          "$schema",     "$id",      "$comment", "deprecated",
                                          "readOnly",    "writeOnly"};
  return k;
}

const std::set<std::string>& Supported() {
  static const std::set<std::string> k = {
      "type",       "properties", "required", "additionalProperties",
      "items",      "minItems",   "maxItems", "enum",
      "const",      "anyOf",      "$ref",     "$defs",
      "definitions"};
  return k;
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

}  // namespace

JsonSchemaCompiler::JsonSchemaCompiler(GrammarBuilder& b) : b_(b) {}

uint32_t JsonSchemaCompiler::LiteralRule(const std::string& name, const std::string& text) {
  return b_.RuleOf(name, {GrammarBuilder::Literal(text)});
}

uint32_t JsonSchemaCompiler::Ws() {
  if (ws_ != UINT32_MAX) return ws_;
  uint32_t indent = b_.RuleOf("indent0", {{}});
  for (int k = 1; k <= kMaxIndent; ++k) {
    Sequence more = GrammarBuilder::Literal(" ");
    more.push_back(Symbol::Rule(indent));
    indent = b_.RuleOf(fmt::format("indent{}", k), {more, {}});
  }
  Sequence newline = GrammarBuilder::Literal("\n");
  newline.push_back(Symbol::Rule(indent));
  ws_ = b_.RuleOf("ws", {{}, GrammarBuilder::Literal(" "), newline});
  return ws_;
}

uint32_t JsonSchemaCompiler::String() {
  if (string_ != UINT32_MAX) return string_;
  ByteSet plain;
  plain.AddRange(0x20, 0xff);
  plain.bits['"' >> 6] &= ~(uint64_t(1) << ('"' & 63));
  plain.bits['\\' >> 6] &= ~(uint64_t(1) << ('\\' & 63));
  ByteSet esc;
  for (char c : std::string("\"\\/bfnrt")) esc.Add(uint8_t(c));
  ByteSet hex;
  hex.AddRange('0', '9');
  hex.AddRange('a', 'f');
  hex.AddRange('A', 'F');
  const uint32_t ch = b_.RuleOf(
      "char", {{Symbol::Bytes(plain)},
               {Symbol::Bytes(ByteSet::Of('\\')), Symbol::Bytes(esc)},
               {Symbol::Bytes(ByteSet::Of('\\')), Symbol::Bytes(ByteSet::Of('u')),
                Symbol::Bytes(hex), Symbol::Bytes(hex), Symbol::Bytes(hex), Symbol::Bytes(hex)}});
  const uint32_t chars = b_.Star("chars", {Symbol::Rule(ch)});
  string_ = b_.RuleOf("string", {{Symbol::Bytes(ByteSet::Of('"')), Symbol::Rule(chars),
                                  Symbol::Bytes(ByteSet::Of('"'))}});
  return string_;
}

uint32_t JsonSchemaCompiler::Integer() {
  if (integer_ != UINT32_MAX) return integer_;
  ByteSet digit, nonzero;
  digit.AddRange('0', '9');
  nonzero.AddRange('1', '9');
  const uint32_t digits = b_.Star("digits", {Symbol::Bytes(digit)});
  const uint32_t natural = b_.RuleOf(
      "natural", {GrammarBuilder::Literal("0"), {Symbol::Bytes(nonzero), Symbol::Rule(digits)}});
  Sequence neg = GrammarBuilder::Literal("-");
  neg.push_back(Symbol::Rule(natural));
  integer_ = b_.RuleOf("integer", {{Symbol::Rule(natural)}, neg});
  return integer_;
}

uint32_t JsonSchemaCompiler::Number() {
  if (number_ != UINT32_MAX) return number_;
  ByteSet digit, e, sign;
  digit.AddRange('0', '9');
  e.Add('e');
  e.Add('E');
  sign.Add('+');
  sign.Add('-');
  const uint32_t digits = b_.Star("digits_", {Symbol::Bytes(digit)});
  const uint32_t frac = b_.RuleOf(
      "frac", {{}, {Symbol::Bytes(ByteSet::Of('.')), Symbol::Bytes(digit), Symbol::Rule(digits)}});
  const uint32_t exp_sign = b_.RuleOf("exp_sign", {{}, {Symbol::Bytes(sign)}});
  const uint32_t exp = b_.RuleOf(
      "exp",
      {{}, {Symbol::Bytes(e), Symbol::Rule(exp_sign), Symbol::Bytes(digit), Symbol::Rule(digits)}});
  number_ = b_.RuleOf("number", {{Symbol::Rule(Integer()), Symbol::Rule(frac), Symbol::Rule(exp)}});
  return number_;
}

uint32_t JsonSchemaCompiler::AnyValue() {
  if (value_ != UINT32_MAX) return value_;
  value_ = b_.NewRule("value");
  const uint32_t ws = Ws();
  // array ::= "[" ws "]" | "[" ws value (ws "," ws value)* ws "]"
  Sequence more_item = {Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(',')), Symbol::Rule(ws),
                        Symbol::Rule(value_)};
  const uint32_t items = b_.Star("items", more_item);
  const uint32_t array = b_.RuleOf(
      "array",
      {{Symbol::Bytes(ByteSet::Of('[')), Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(']'))},
       {Symbol::Bytes(ByteSet::Of('[')), Symbol::Rule(ws), Symbol::Rule(value_),
        Symbol::Rule(items), Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(']'))}});
  for (uint32_t alt : {AnyObject(), array, String(), Number(), LiteralRule("true", "true"),
                       LiteralRule("false", "false"), LiteralRule("null", "null")}) {
    b_.AddAlternative(value_, {Symbol::Rule(alt)});
  }
  return value_;
}

uint32_t JsonSchemaCompiler::AnyObject() {
  if (object_ != UINT32_MAX) return object_;
  object_ = b_.NewRule("object");
  if (value_ == UINT32_MAX) AnyValue();  // defines object_'s alternatives' value rule first
  const uint32_t ws = Ws();
  const uint32_t member = b_.RuleOf(
      "member", {{Symbol::Rule(String()), Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(':')),
                  Symbol::Rule(ws), Symbol::Rule(value_)}});
  const uint32_t members = b_.Star("members", {Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(',')),
                                               Symbol::Rule(ws), Symbol::Rule(member)});
  b_.AddAlternative(object_, {Symbol::Bytes(ByteSet::Of('{')), Symbol::Rule(ws),
                              Symbol::Bytes(ByteSet::Of('}'))});
  b_.AddAlternative(object_,
                    {Symbol::Bytes(ByteSet::Of('{')), Symbol::Rule(ws), Symbol::Rule(member),
                     Symbol::Rule(members), Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of('}'))});
  return object_;
}

uint32_t JsonSchemaCompiler::Compile(const json& schema, const json& root,
                                     const std::string& path) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return AnyValue();
    throw SchemaError(path, "", "the schema 'false' matches nothing");
  }
  if (!schema.is_object()) {
    throw SchemaError(path, "",
                      "a schema must be an object, got " + std::string(schema.type_name()));
  }
  for (const auto& [k, v] : schema.items()) {
    if (!Supported().count(k) && !Annotations().count(k)) {
      throw SchemaError(path, k, "unsupported JSON Schema keyword '" + k + "'");
    }
  }
  if (auto it = schema.find("$ref"); it != schema.end()) {
    if (!it->is_string()) throw SchemaError(path, "$ref", "'$ref' must be a string");
    for (const auto& [k, v] : schema.items()) {
      if (k != "$ref" && k != "$defs" && k != "definitions" && !Annotations().count(k)) {
        throw SchemaError(path, k, "'" + k + "' next to '$ref' is not supported");
      }
    }
    return Ref(it->get<std::string>(), root, Join(path, "$ref"));
  }
  if (auto it = schema.find("const"); it != schema.end()) {
    return LiteralRule(fmt::format("const{}", counter_++), it->dump());
  }
  if (auto it = schema.find("enum"); it != schema.end()) {
    if (!it->is_array() || it->empty()) {
      throw SchemaError(path, "enum", "'enum' must be a non-empty array");
    }
    std::vector<Sequence> alts;
    for (const auto& v : *it) alts.push_back(GrammarBuilder::Literal(v.dump()));
    return b_.RuleOf(fmt::format("enum{}", counter_++), std::move(alts));
  }
  if (auto it = schema.find("anyOf"); it != schema.end()) {
    if (!it->is_array() || it->empty()) {
      throw SchemaError(path, "anyOf", "'anyOf' must be a non-empty array of schemas");
    }
    std::vector<Sequence> alts;
    for (size_t i = 0; i < it->size(); ++i) {
      alts.push_back(
          {Symbol::Rule(Compile((*it)[i], root, fmt::format("{}[{}]", Join(path, "anyOf"), i)))});
    }
    return b_.RuleOf(fmt::format("anyof{}", counter_++), std::move(alts));
  }
  auto type = schema.find("type");
  if (type == schema.end()) {
    if (schema.contains("properties")) return Object(schema, root, path);
    if (schema.contains("items")) return Array(schema, root, path);
    return AnyValue();  // {} (or annotations only): any JSON
  }
  if (type->is_string()) return CompileTyped(schema, type->get<std::string>(), root, path);
  if (type->is_array() && !type->empty()) {
    std::vector<Sequence> alts;
    for (const auto& t : *type) {
      if (!t.is_string()) throw SchemaError(path, "type", "'type' entries must be strings");
      alts.push_back({Symbol::Rule(CompileTyped(schema, t.get<std::string>(), root, path))});
    }
    return b_.RuleOf(fmt::format("types{}", counter_++), std::move(alts));
  }
  throw SchemaError(path, "type", "'type' must be a string or a non-empty array of strings");
}

uint32_t JsonSchemaCompiler::CompileTyped(const json& schema, const std::string& type,
                                          const json& root, const std::string& path) {
  if (type == "object") return Object(schema, root, path);
  if (type == "array") return Array(schema, root, path);
  if (type == "string") return String();
  if (type == "number") return Number();
  if (type == "integer") return Integer();
  if (type == "boolean") {
    return b_.RuleOf("boolean",
                     {GrammarBuilder::Literal("true"), GrammarBuilder::Literal("false")});
  }
  if (type == "null") return LiteralRule("null_", "null");
  throw SchemaError(path, "type", "unknown type '" + type + "'");
}

uint32_t JsonSchemaCompiler::Object(const json& schema, const json& root, const std::string& path) {
  if (auto ap = schema.find("additionalProperties");
      ap != schema.end() && !(ap->is_boolean() && !ap->get<bool>())) {
    if (schema.contains("properties") || !(ap->is_boolean() || ap->is_object())) {
      throw SchemaError(Join(path, "additionalProperties"), "additionalProperties",
                        "'additionalProperties' other than false is not supported");
    }
  }
  auto props = schema.find("properties");
  if (props == schema.end()) {
    if (schema.contains("required")) {
      throw SchemaError(path, "required", "'required' needs 'properties'");
    }
    return AnyObject();
  }
  if (!props->is_object()) {
    throw SchemaError(path, "properties", "'properties' must be an object");
  }
  std::set<std::string> required;
  if (auto req = schema.find("required"); req != schema.end()) {
    if (!req->is_array()) throw SchemaError(path, "required", "'required' must be an array");
    for (const auto& r : *req) {
      if (!r.is_string() || !props->contains(r.get<std::string>())) {
        throw SchemaError(path, "required",
                          "'required' names '" + (r.is_string() ? r.get<std::string>() : r.dump()) +
                              "', which is not in 'properties'");
      }
      required.insert(r.get<std::string>());
    }
  }
  const uint32_t ws = Ws();
  const int64_t id = counter_++;
  // Properties in schema order; an optional one may be left out. tail[i][emitted]: the members
  // from property i on, `emitted` telling whether one came before (then a comma leads).
  std::vector<std::pair<std::string, uint32_t>> members;
  for (const auto& [name, sub] : props->items()) {
    const uint32_t value = Compile(sub, root, Join(Join(path, "properties"), name));
    Sequence m = GrammarBuilder::Literal(json(name).dump());
    m.push_back(Symbol::Rule(ws));
    m.push_back(Symbol::Bytes(ByteSet::Of(':')));
    m.push_back(Symbol::Rule(ws));
    m.push_back(Symbol::Rule(value));
    members.emplace_back(name, b_.RuleOf(fmt::format("obj{}_{}", id, name), {m}));
  }
  const size_t n = members.size();
  std::vector<std::array<uint32_t, 2>> tail(n + 1);
  tail[n] = {b_.RuleOf(fmt::format("obj{}_end", id), {{}}), 0};
  tail[n][1] = tail[n][0];
  for (size_t i = n; i-- > 0;) {
    const bool optional = !required.count(members[i].first);
    for (int emitted = 0; emitted < 2; ++emitted) {
      std::vector<Sequence> alts;
      Sequence take;
      if (emitted) {
        take = {Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(',')), Symbol::Rule(ws)};
      }
      take.push_back(Symbol::Rule(members[i].second));
      take.push_back(Symbol::Rule(tail[i + 1][1]));
      alts.push_back(take);
      if (optional) alts.push_back({Symbol::Rule(tail[i + 1][size_t(emitted)])});
      tail[i][size_t(emitted)] = b_.RuleOf(fmt::format("obj{}_from{}_{}", id, i, emitted), alts);
    }
  }
  return b_.RuleOf(fmt::format("obj{}", id),
                   {{Symbol::Bytes(ByteSet::Of('{')), Symbol::Rule(ws), Symbol::Rule(tail[0][0]),
                     Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of('}'))}});
}

uint32_t JsonSchemaCompiler::Array(const json& schema, const json& root, const std::string& path) {
  auto count = [&](const char* key, int64_t fallback) -> int64_t {
    auto it = schema.find(key);
    if (it == schema.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      throw SchemaError(path, key, std::string("'") + key + "' must be a non-negative integer");
    }
    return it->get<int64_t>();
  };
  const int64_t lo = count("minItems", 0), hi = count("maxItems", -1);
  if (hi >= 0 && hi < lo) throw SchemaError(path, "maxItems", "'maxItems' is below 'minItems'");
  if (lo > kMaxBoundedItems || hi > kMaxBoundedItems) {
    throw SchemaError(path, hi > kMaxBoundedItems ? "maxItems" : "minItems",
                      fmt::format("item counts above {} are not supported", kMaxBoundedItems));
  }
  uint32_t item;
  if (auto it = schema.find("items"); it != schema.end()) {
    item = Compile(*it, root, Join(path, "items"));
  } else {
    item = AnyValue();
  }
  const uint32_t ws = Ws();
  const int64_t id = counter_++;
  // [ ws item (ws , ws item){lo-1, hi-1} ws ]  or  [ ws ]  when lo == 0.
  const uint32_t more = b_.RuleOf(
      fmt::format("arr{}_next", id),
      {{Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(',')), Symbol::Rule(ws), Symbol::Rule(item)}});
  const uint32_t rest = b_.Repeat(fmt::format("arr{}_rest", id), more,
                                  int(std::max<int64_t>(lo - 1, 0)), hi < 0 ? -1 : int(hi - 1));
  std::vector<Sequence> alts;
  if (hi != 0) {
    alts.push_back({Symbol::Bytes(ByteSet::Of('[')), Symbol::Rule(ws), Symbol::Rule(item),
                    Symbol::Rule(rest), Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(']'))});
  }
  if (lo == 0) {
    alts.push_back(
        {Symbol::Bytes(ByteSet::Of('[')), Symbol::Rule(ws), Symbol::Bytes(ByteSet::Of(']'))});
  }
  return b_.RuleOf(fmt::format("arr{}", id), std::move(alts));
}

uint32_t JsonSchemaCompiler::Ref(const std::string& ref, const json& root,
                                 const std::string& path) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  const json* target = nullptr;
  if (ref == "#") {
    target = &root;
  } else {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.rfind(p, 0) != 0) continue;
      const std::string section = p.substr(2, p.size() - 3);
      const std::string name = ref.substr(p.size());
      auto defs = root.find(section);
      if (defs != root.end() && defs->is_object() && defs->contains(name)) target = &(*defs)[name];
    }
  }
  if (!target) {
    throw SchemaError(path, "$ref",
                      "'$ref' '" + ref +
                          "' does not resolve (only \"#\", \"#/$defs/NAME\" and "
                          "\"#/definitions/NAME\" are supported)");
  }
  // Define the rule before compiling the target so that recursive references find it.
  const uint32_t rule = b_.NewRule("ref_" + ref);
  refs_[ref] = rule;
  b_.AddAlternative(rule, {Symbol::Rule(Compile(*target, root, ref))});
  return rule;
}

Grammar SchemaGrammar(const json& schema) {
  GrammarBuilder b;
  JsonSchemaCompiler c(b);
  const uint32_t root = c.Compile(schema, schema, "");
  return b.Build(root);
}

Grammar JsonObjectGrammar() {
  GrammarBuilder b;
  JsonSchemaCompiler c(b);
  return b.Build(c.AnyObject());
}

}  // namespace tq::grammar
