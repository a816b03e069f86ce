// Jinja's built-in filters (jinja2.filters), with Hugging Face's tojson.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/json_dump.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {
namespace {

bool Given(const Value& v) { return !v.is_undefined(); }
bool BoolArg(const Value& v, bool dflt) { return Given(v) ? Truthy(v) : dflt; }
int64_t IntArg(const Value& v, int64_t dflt, const char* fn) {
  if (!Given(v)) return dflt;
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return v.int_value();
  if (v.kind() == Kind::kFloat) return static_cast<int64_t>(v.float_value());
  ThrowRender(fmt::format("{}: expected an integer, got {}", fn, TypeName(v)));
}

// Jinja's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
Value GetPath(Evaluator& ev, Value v, const Value& attribute) {
  if (!attribute.is_string()) return ev.GetItem(v, attribute);
  static const std::string kDot = ".";
  for (const std::string& part : PySplit(attribute.str(), &kDot, -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    v = ev.GetItem(v, digits ? Value(static_cast<int64_t>(std::atoll(part.c_str()))) : Value(part));
  }
  return v;
}

Value IgnoreCase(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(ToLower(v.str()));
  return v;
}

Value Abs(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "abs");
  if (v.kind() == Kind::kFloat) return Value(std::fabs(v.float_value()));
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) {
    if (v.int_value() == INT64_MIN) ThrowRender("integer overflow (beyond 64 bits)");
    return Value(std::abs(v.int_value()));
  }
  if (v.is_undefined()) FailUndefined(v);
  ThrowRender(fmt::format("bad operand type for abs(): '{}'", TypeName(v)));
}

Value Attr(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"name"}, "attr");
  const std::string name = ToStr(p[0]);
  // getattr() only: methods and namespace attributes, never dict items.
  if (v.kind() == Kind::kNamespace) return ev.GetAttr(v, name);
  if (v.is_undefined()) FailUndefined(v);
  Value m = FindMethod(v, name);
  if (!m.is_undefined()) return m;
  return Value::Undefined(fmt::format("'{}' has no attribute '{}'", ObjectTypeRepr(v), name));
}

Value Batch(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"linecount", "fill_with"}, "batch");
  const int64_t n = IntArg(p[0], 0, "batch");
  if (n <= 0) ThrowRender("batch: linecount must be positive");
  List out, cur;
  for (Value& item : Iterate(v)) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == n)
      out.push_back(Value::MakeList(std::move(cur))), cur = {};
  }
  if (!cur.empty()) {
    if (Given(p[1]) && !p[1].is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(p[1]);
    out.push_back(Value::MakeList(std::move(cur)));
  }
  return Value::MakeGenerator(std::move(out));
}

Value Capitalize(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "capitalize");
  return Value(PyCapitalize(ToStr(v)));
}

Value Center(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"width"}, "center");
  CallArgs inner;
  inner.pos.push_back(Given(p[0]) ? p[0] : Value(80));
  return ev.Call(ev.GetAttr(Value(ToStr(v)), "center"), inner);
}

Value Default(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"default_value", "boolean"}, "default");
  if (v.is_undefined() || (BoolArg(p[1], false) && !Truthy(v)))
    return Given(p[0]) ? p[0] : Value(std::string());
  return v;
}

Value DictSort(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"case_sensitive", "by", "reverse"}, "dictsort");
  if (!v.is_mapping()) ThrowRender("dictsort: expected a mapping");
  const bool cs = BoolArg(p[0], false), rev = BoolArg(p[2], false);
  const std::string by = Given(p[1]) ? ToStr(p[1]) : "key";
  if (by != "key" && by != "value") ThrowRender("You can only sort by either \"key\" or \"value\"");
  const int idx = by == "key" ? 0 : 1;
  std::vector<std::pair<Value, Value>> items = v.dict().items;
  std::stable_sort(items.begin(), items.end(), [&](auto& x, auto& y) {
    const Value& a1 = idx == 0 ? x.first : x.second;
    const Value& b1 = idx == 0 ? y.first : y.second;
    const int c = CompareValues(IgnoreCase(a1, cs), IgnoreCase(b1, cs));
    return rev ? c > 0 : c < 0;
  });
  List out;
  for (auto& [k, val] : items) out.push_back(Value::MakeTuple({k, val}));
  return Value::MakeList(std::move(out));
}

Value Escape(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "escape");
  std::string out;
  for (char c : ToStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Value First(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "first");
  List items = Iterate(v);
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

Value Last(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "last");
  if (v.kind() == Kind::kGenerator) ThrowRender("'generator' object is not reversible");
  List items = Iterate(v);
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

bool ParseFloatStr(const std::string& raw, double* out) {
  std::string s = PyStrip(raw, nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

Value Float(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"default"}, "float");
  const Value dflt = Given(p[0]) ? p[0] : Value(0.0);
  if (v.is_undefined()) FailUndefined(v);  // float(Undefined) raises
  if (v.is_number()) return Value(v.float_value());
  double d;
  if (v.is_string() && ParseFloatStr(v.str(), &d)) return Value(d);
  return dflt;
}

Value Int(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"default", "base"}, "int");
  const Value dflt = Given(p[0]) ? p[0] : Value(0);
  const int base = static_cast<int>(IntArg(p[1], 10, "int"));
  if (v.is_undefined()) FailUndefined(v);  // int(Undefined) raises
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value(v.int_value());
  if (v.kind() == Kind::kFloat) {
    const double d = v.float_value();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return dflt;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), nullptr, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (!s.empty() && base >= 2 && base <= 36) {
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(s.c_str(), &end, base);
      if (end && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(x));
    }
    double d;
    if (ParseFloatStr(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value(static_cast<int64_t>(d));
  }
  return dflt;
}

Value Format(Evaluator&, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty())
    ThrowRender("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kw.empty()) {
    args = Value::MakeDict();
    for (auto& [k, x] : a.kw) args.dict().Set(Value(k), x);
  } else {
    args = Value::MakeTuple(a.pos);
  }
  return Value(PyPercentFormat(ToStr(v), args));
}

Value Indent(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"width", "first", "blank"}, "indent");
  std::string indention;
  if (p[0].is_string()) {
    indention = p[0].str();
  } else {
    indention.assign(
        static_cast<size_t>(std::clamp<int64_t>(IntArg(p[0], 4, "indent"), 0, 1 << 16)), ' ');
  }
  const bool first = BoolArg(p[1], false), blank = BoolArg(p[2], false);
  if (v.is_undefined()) FailUndefined(v);
  if (!v.is_string())  // Jinja does `s += "\n"` on the value itself
    ThrowRender(fmt::format("unsupported operand type(s) for +=: '{}' and 'str'", TypeName(v)));
  const std::string s = v.str() + "\n";  // Jinja's quirk so that splitlines() keeps a last line
  std::vector<std::string> lines = PySplitLines(s);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value(std::move(rv));
}

Value Items(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "items");
  if (v.is_undefined()) return Value::MakeGenerator({});
  if (!v.is_mapping()) ThrowRender("Can only get item pairs from a mapping.");
  List out;
  for (auto& [k, x] : v.dict().items) out.push_back(Value::MakeTuple({k, x}));
  return Value::MakeGenerator(std::move(out));
}

Value Join(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"d", "attribute"}, "join");
  const std::string sep = Given(p[0]) ? ToStr(p[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += ToStr(Given(p[1]) && !p[1].is_none() ? GetPath(ev, item, p[1]) : item);
    if (out.size() > ev.max_size()) ThrowRender("string is too large");
  }
  return Value(std::move(out));
}

Value Length(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "length");
  return Value(static_cast<int64_t>(jinja::Length(v)));
}

Value ListF(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "list");
  return Value::MakeList(Iterate(v));
}

Value Lower(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "lower");
  return Value(ToLower(ToStr(v)));
}

Value Upper(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "upper");
  return Value(ToUpper(ToStr(v)));
}

Value Map(Evaluator& ev, const Value& v, CallArgs& a) {
  if (!Truthy(v)) return Value::MakeGenerator({});
  List items = Iterate(v);
  List out;
  out.reserve(items.size());
  if (a.pos.empty()) {
    Value attribute, dflt;
    for (auto& [k, x] : a.kw) {
      if (k == "attribute") {
        attribute = x;
      } else if (k == "default") {
        dflt = x;
      } else {
        ThrowRender(fmt::format("Unexpected keyword argument '{}'", k));
      }
    }
    if (!Given(attribute)) ThrowRender("map requires a filter argument");
    for (const Value& item : items) {
      Value r = GetPath(ev, item, attribute);
      if (r.is_undefined() && Given(dflt) && !dflt.is_none()) r = dflt;
      out.push_back(std::move(r));
    }
    return Value::MakeGenerator(std::move(out));
  }
  const std::string name = ToStr(a.pos[0]);
  if (!FindFilter(name)) ThrowRender(fmt::format("No filter named '{}'.", name));
  for (const Value& item : items) {
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    out.push_back(ev.ApplyFilter(name, item, rest));
  }
  return Value::MakeGenerator(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value SelectImpl(Evaluator& ev, const Value& v, CallArgs& a, bool want, bool lookup_attr) {
  if (!Truthy(v)) return Value::MakeGenerator({});
  size_t off = 0;
  Value attribute;
  if (lookup_attr) {
    if (a.pos.empty()) ThrowRender("Missing parameter for attribute name");
    attribute = a.pos[0];
    off = 1;
  }
  std::string test;
  if (a.pos.size() > off) {
    test = ToStr(a.pos[off]);
    if (!FindTest(test)) ThrowRender(fmt::format("No test named '{}'.", test));
  }
  List out;
  for (const Value& item : Iterate(v)) {
    const Value subject = lookup_attr ? GetPath(ev, item, attribute) : item;
    bool r;
    if (test.empty()) {
      r = Truthy(subject);
    } else {
      CallArgs rest;
      rest.pos.assign(a.pos.begin() + off + 1, a.pos.end());
      rest.kw = a.kw;
      r = ev.ApplyTest(test, subject, rest);
    }
    if (r == want) out.push_back(item);
  }
  return Value::MakeGenerator(std::move(out));
}
Value Select(Evaluator& ev, const Value& v, CallArgs& a) {
  return SelectImpl(ev, v, a, true, false);
}
Value Reject(Evaluator& ev, const Value& v, CallArgs& a) {
  return SelectImpl(ev, v, a, false, false);
}
Value SelectAttr(Evaluator& ev, const Value& v, CallArgs& a) {
  return SelectImpl(ev, v, a, true, true);
}
Value RejectAttr(Evaluator& ev, const Value& v, CallArgs& a) {
  return SelectImpl(ev, v, a, false, true);
}

// min / max: `attribute` picks the compared field; strings compare case-insensitively.
Value MinMax(Evaluator& ev, const Value& v, CallArgs& a, bool want_max) {
  auto p = BindArgs(a, {"case_sensitive", "attribute"}, want_max ? "max" : "min");
  const bool cs = BoolArg(p[0], false);
  List items = Iterate(v);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    return IgnoreCase(Given(p[1]) && !p[1].is_none() ? GetPath(ev, x, p[1]) : x, cs);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    const int c = CompareValues(k, best_key);
    if (want_max ? c > 0 : c < 0) best = i, best_key = std::move(k);
  }
  return items[best];
}
Value Max(Evaluator& ev, const Value& v, CallArgs& a) { return MinMax(ev, v, a, true); }
Value Min(Evaluator& ev, const Value& v, CallArgs& a) { return MinMax(ev, v, a, false); }

Value Replace(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"old", "new", "count"}, "replace");
  const int64_t count = Given(p[2]) && !p[2].is_none() ? IntArg(p[2], -1, "replace") : -1;
  std::string out = PyReplace(ToStr(v), ToStr(p[0]), ToStr(p[1]), count);
  if (out.size() > ev.max_size()) ThrowRender("string is too large");
  return Value(std::move(out));
}

Value Reverse(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "reverse");
  if (v.is_string()) {
    std::u32string u = DecodeUtf8(v.str());
    std::reverse(u.begin(), u.end());
    return Value(EncodeUtf8(u));
  }
  List items = Iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

Value Round(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"precision", "method"}, "round");
  const int64_t precision = IntArg(p[0], 0, "round");
  const std::string method = Given(p[1]) ? ToStr(p[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    ThrowRender("method must be common, ceil or floor");
  if (!v.is_number()) {
    if (v.is_undefined()) FailUndefined(v);
    ThrowRender(fmt::format("type {} doesn't define __round__ method", TypeName(v)));
  }
  if (method == "common") {
    if (v.kind() != Kind::kFloat) return Value(v.int_value());  // round(int, n) stays int
    const double d = v.float_value();
    if (!std::isfinite(d)) return v;
    if (precision == 0) return Value(std::nearbyint(d));
    if (precision > 0 && precision < 300) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), d);  // correctly rounded
      return Value(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value(std::nearbyint(d * scale) / scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.float_value() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value Safe(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "safe");
  return Value(ToStr(v));
}

Value Slice(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"slices", "fill_with"}, "slice");
  const int64_t slices = IntArg(p[0], 0, "slice");
  if (slices <= 0 || slices > 1 << 20) ThrowRender("slice: slices must be positive");
  List seq = Iterate(v);
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices, with_extra = length % slices;
  int64_t offset = 0;
  List out;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per;
    if (i < with_extra) ++offset;
    const int64_t end = offset + (i + 1) * per;
    List tmp(seq.begin() + start, seq.begin() + end);
    if (Given(p[1]) && !p[1].is_none() && i >= with_extra) tmp.push_back(p[1]);
    out.push_back(Value::MakeList(std::move(tmp)));
  }
  return Value::MakeGenerator(std::move(out));
}

Value Sort(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"reverse", "case_sensitive", "attribute"}, "sort");
  const bool rev = BoolArg(p[0], false), cs = BoolArg(p[1], false);
  std::vector<Value> attrs;
  if (Given(p[2]) && !p[2].is_none()) {
    if (p[2].is_string()) {
      const std::string comma = ",";
      for (auto& part : PySplit(p[2].str(), &comma, -1)) attrs.emplace_back(part);
    } else {
      attrs.push_back(p[2]);
    }
  }
  List items = Iterate(v);
  std::vector<std::pair<List, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    List k;
    if (attrs.empty()) {
      k.push_back(IgnoreCase(items[i], cs));
    } else {
      for (auto& at : attrs) k.push_back(IgnoreCase(GetPath(ev, items[i], at), cs));
    }
    keyed.emplace_back(std::move(k), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](auto& x, auto& y) {
    for (size_t j = 0; j < x.first.size(); ++j) {
      const int c = CompareValues(x.first[j], y.first[j]);
      if (c != 0) return rev ? c > 0 : c < 0;
    }
    return false;
  });
  List out;
  for (auto& kv : keyed) out.push_back(items[kv.second]);
  return Value::MakeList(std::move(out));
}

Value String(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "string");
  return Value(ToStr(v));
}

Value Sum(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"attribute", "start"}, "sum");
  Value total = Given(p[1]) ? p[1] : Value(0);
  for (const Value& item : Iterate(v))
    total =
        BinaryOp(BinOp::kAdd, total,
                 Given(p[0]) && !p[0].is_none() ? GetPath(ev, item, p[0]) : item, ev.max_size());
  return total;
}

Value Title(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "title");
  // Jinja splits on runs of [-\s({\[<] and capitalises each piece.
  const std::u32string u = DecodeUtf8(ToStr(v));
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c);
  };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    const bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    const std::u32string_view piece = std::u32string_view(u).substr(i, j - i);
    if (sep) {
      out += EncodeUtf8(piece);
    } else {
      out += UpperChar(piece[0]) + ToLower(EncodeUtf8(piece.substr(1)));
    }
    i = j;
  }
  return Value(std::move(out));
}

Value ToJson(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  JsonDumpOptions o;
  o.ensure_ascii = BoolArg(p[0], false);
  o.sort_keys = BoolArg(p[3], false);
  if (Given(p[1]) && !p[1].is_none()) {
    if (p[1].is_string()) {
      o.indent = p[1].str();
    } else {
      o.indent = std::string(
          static_cast<size_t>(std::clamp<int64_t>(IntArg(p[1], 0, "tojson"), 0, 1 << 10)), ' ');
    }
    o.item_separator = ",";
  }
  if (Given(p[2]) && !p[2].is_none()) {
    List seps = Iterate(p[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      ThrowRender("tojson: separators must be a pair of strings");
    o.item_separator = seps[0].str();
    o.key_separator = seps[1].str();
  }
  return Value(PyJsonDumps(v, o));
}

Value Trim(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"chars"}, "trim");
  const std::string chars = Given(p[0]) && !p[0].is_none() ? ToStr(p[0]) : "";
  return Value(PyStrip(ToStr(v), Given(p[0]) && !p[0].is_none() ? &chars : nullptr, true, true));
}

Value Truncate(Evaluator&, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"length", "killwords", "end", "leeway"}, "truncate");
  const int64_t length = IntArg(p[0], 255, "truncate");
  const bool killwords = BoolArg(p[1], false);
  const std::string end = Given(p[2]) ? ToStr(p[2]) : "...";
  const int64_t leeway = IntArg(p[3], 5, "truncate");
  if (!v.is_string()) {  // Jinja measures len() of the value itself
    if (static_cast<int64_t>(jinja::Length(v)) <= length + leeway) return v;
    ThrowRender(fmt::format("can only truncate strings, not {}", TypeName(v)));
  }
  const std::u32string s = DecodeUtf8(ToStr(v));
  const int64_t end_len = static_cast<int64_t>(CodePointCount(end));
  if (length < end_len) ThrowRender(fmt::format("expected length >= {}, got {}", end_len, length));
  if (leeway < 0) ThrowRender(fmt::format("expected leeway >= 0, got {}", leeway));
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(EncodeUtf8(s));
  const std::string head = EncodeUtf8(std::u32string_view(s).substr(0, length - end_len));
  if (killwords) return Value(head + end);
  const std::string space = " ";
  return Value(PyRSplit(head, &space, 1)[0] + end);
}

Value Unique(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"case_sensitive", "attribute"}, "unique");
  const bool cs = BoolArg(p[0], false);
  List seen, out;
  for (const Value& item : Iterate(v)) {
    Value key = IgnoreCase(Given(p[1]) && !p[1].is_none() ? GetPath(ev, item, p[1]) : item, cs);
    bool dup = false;
    for (const Value& s : seen)
      if (Equals(s, key)) dup = true;
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::MakeGenerator(std::move(out));
}

Value WordCount(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "wordcount");
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(ToStr(v))) {
    const bool w = IsPyAlpha(c) || IsPyDigit(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

const std::pair<std::string_view, FilterFn> kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"batch", Batch},
    {"capitalize", Capitalize},
    {"center", Center},
    {"count", Length},
    {"d", Default},
    {"default", Default},
    {"dictsort", DictSort},
    {"e", Escape},
    {"escape", Escape},
    {"forceescape", Escape},
    {"first", First},
    {"float", Float},
    {"format", Format},
    {"indent", Indent},
    {"int", Int},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", Length},
    {"list", ListF},
    {"lower", Lower},
    {"map", Map},
    {"max", Max},
    {"min", Min},
    {"reject", Reject},
    {"rejectattr", RejectAttr},
    {"replace", Replace},
    {"reverse", Reverse},
    {"round", Round},
    {"safe", Safe},
    {"select", Select},
    {"selectattr", SelectAttr},
    {"slice", Slice},
    {"sort", Sort},
    {"string", String},
    {"sum", Sum},
    {"title", Title},
    {"tojson", ToJson},
    {"trim", Trim},
    {"truncate", Truncate},
    {"unique", Unique},
    {"upper", Upper},
    {"wordcount", WordCount},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const auto& [n, f] : kFilters)
    if (n == name) return f;
  return nullptr;
}

}  // namespace tq::jinja
