// Jinja's tests (`x is name`), as jinja2.tests defines them.
#include <fmt/format.h>

#include <utility>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {
namespace {

void NoArgs(CallArgs& a, const char* test) { BindArgs(a, {}, test); }

Value Arg(CallArgs& a, const char* param, const char* test) {
  auto v = BindArgs(a, {param}, test);
  return v[0];
}

bool ModEquals(Evaluator& ev, const Value& v, const Value& m, int64_t want) {
  return Equals(BinaryOp(BinOp::kMod, v, m, ev.max_size()), Value(want));
}

bool Odd(Evaluator& ev, const Value& v, CallArgs& a) {
  NoArgs(a, "odd");
  return ModEquals(ev, v, Value(2), 1);
}
bool Even(Evaluator& ev, const Value& v, CallArgs& a) {
  NoArgs(a, "even");
  return ModEquals(ev, v, Value(2), 0);
}
bool DivisibleBy(Evaluator& ev, const Value& v, CallArgs& a) {
  return ModEquals(ev, v, Arg(a, "num", "divisibleby"), 0);
}
bool Defined(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "defined");
  return !v.is_undefined();
}
bool UndefinedTest(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "undefinedtest");
  return v.is_undefined();
}
bool IsFilter(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "isfilter");
  return v.is_string() && FindFilter(v.str()) != nullptr;
}
bool IsTest(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "istest");
  return v.is_string() && FindTest(v.str()) != nullptr;
}
bool None(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "none");
  return v.is_none();
}
bool Boolean(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "boolean");
  return v.kind() == Kind::kBool;
}
bool False(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "false");
  return v.kind() == Kind::kBool && !v.bool_value();
}
bool True(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "true");
  return v.kind() == Kind::kBool && v.bool_value();
}
bool Integer(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "integer");
  return v.kind() == Kind::kInt;
}
bool Float(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "float");
  return v.kind() == Kind::kFloat;
}
bool Lower(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "lower");
  const std::string s = ToStr(v);
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (IsPyUpper(c)) return false;
    if (IsPyLower(c)) cased = true;
  }
  return cased;
}
bool Upper(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "upper");
  const std::string s = ToStr(v);
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (IsPyLower(c)) return false;
    if (IsPyUpper(c)) cased = true;
  }
  return cased;
}
bool String(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "string");
  return v.is_string();
}
bool Mapping(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "mapping");
  return v.is_mapping();
}
bool Number(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "number");
  return v.is_number();
}
// len() and __getitem__: strings, lists, tuples, dicts -- and Undefined, as in Jinja.
bool Sequence(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "sequence");
  return v.is_string() || v.is_sequence() || v.is_mapping() || v.is_undefined();
}
bool Iterable(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "iterable");
  return v.is_string() || v.is_sequence() || v.is_mapping() || v.is_undefined() ||
         v.kind() == Kind::kGenerator;
}
bool CallableTest(Evaluator&, const Value& v, CallArgs& a) {
  NoArgs(a, "callabletest");
  return v.kind() == Kind::kCallable || v.is_undefined();
}  // Undefined has __call__
bool SameAs(Evaluator&, const Value& v, CallArgs& a) {
  const Value o = Arg(a, "other", "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::kNone:
    case Kind::kUndefined:
      return v.is_none() || v.identity() == o.identity();
    case Kind::kBool:
      return v.bool_value() == o.bool_value();
    case Kind::kInt:  // CPython caches small ints
      return v.int_value() == o.int_value() && v.int_value() >= -5 && v.int_value() <= 256;
    case Kind::kFloat:
      return false;
    default:
      return v.identity() == o.identity();
  }
}
bool Escaped(Evaluator&, const Value&, CallArgs& a) {
  NoArgs(a, "escaped");
  return false;
}
bool In(Evaluator&, const Value& v, CallArgs& a) { return Contains(Arg(a, "seq", "in"), v); }
bool Eq(Evaluator&, const Value& v, CallArgs& a) { return Equals(v, Arg(a, "other", "eq")); }
bool Ne(Evaluator&, const Value& v, CallArgs& a) { return !Equals(v, Arg(a, "other", "ne")); }
bool Gt(Evaluator&, const Value& v, CallArgs& a) {
  return CompareValues(v, Arg(a, "other", "gt")) > 0;
}
bool Ge(Evaluator&, const Value& v, CallArgs& a) {
  return CompareValues(v, Arg(a, "other", "ge")) >= 0;
}
bool Lt(Evaluator&, const Value& v, CallArgs& a) {
  return CompareValues(v, Arg(a, "other", "lt")) < 0;
}
bool Le(Evaluator&, const Value& v, CallArgs& a) {
  return CompareValues(v, Arg(a, "other", "le")) <= 0;
}

const std::pair<std::string_view, TestFn> kTests[] = {
    {"odd", Odd},
    {"even", Even},
    {"divisibleby", DivisibleBy},
    {"defined", Defined},
    {"undefined", UndefinedTest},
    {"filter", IsFilter},
    {"test", IsTest},
    {"none", None},
    {"boolean", Boolean},
    {"false", False},
    {"true", True},
    {"integer", Integer},
    {"float", Float},
    {"lower", Lower},
    {"upper", Upper},
    {"string", String},
    {"mapping", Mapping},
    {"number", Number},
    {"sequence", Sequence},
    {"iterable", Iterable},
    {"callable", CallableTest},
    {"sameas", SameAs},
    {"escaped", Escaped},
    {"in", In},
    {"==", Eq},
    {"eq", Eq},
    {"equalto", Eq},
    {"!=", Ne},
    {"ne", Ne},
    {">", Gt},
    {"gt", Gt},
    {"greaterthan", Gt},
    {">=", Ge},
    {"ge", Ge},
    {"<", Lt},
    {"lt", Lt},
    {"lessthan", Lt},
    {"<=", Le},
    {"le", Le},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const auto& [n, f] : kTests)
    if (n == name) return f;
  return nullptr;
}

}  // namespace tq::jinja
