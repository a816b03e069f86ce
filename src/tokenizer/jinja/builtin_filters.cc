// Jinja's filters on strings and numbers (jinja2.filters), with Hugging Face's tojson; the
// sequence filters are in builtin_filters_seq.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/filter_util.h"
#include "tokenizer/jinja/json_dump.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {
namespace {

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

Value Lower(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "lower");
  return Value(ToLower(ToStr(v)));
}

Value Upper(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "upper");
  return Value(ToUpper(ToStr(v)));
}

Value Replace(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"old", "new", "count"}, "replace");
  const int64_t count = Given(p[2]) && !p[2].is_none() ? IntArg(p[2], -1, "replace") : -1;
  std::string out = PyReplace(ToStr(v), ToStr(p[0]), ToStr(p[1]), count);
  if (out.size() > ev.max_size()) ThrowRender("string is too large");
  return Value(std::move(out));
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

Value String(Evaluator&, const Value& v, CallArgs& a) {
  BindArgs(a, {}, "string");
  return Value(ToStr(v));
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
    o.item_separator.assign(1, ',');  // Python's default when indent is given
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
    {"abs", Abs},           {"attr", Attr},     {"capitalize", Capitalize},
    {"center", Center},     {"d", Default},     {"default", Default},
    {"e", Escape},          {"escape", Escape}, {"forceescape", Escape},
    {"float", Float},       {"format", Format}, {"indent", Indent},
    {"int", Int},           {"lower", Lower},   {"replace", Replace},
    {"round", Round},       {"safe", Safe},     {"string", String},
    {"title", Title},       {"tojson", ToJson}, {"trim", Trim},
    {"truncate", Truncate}, {"upper", Upper},   {"wordcount", WordCount},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const auto& [n, f] : kFilters)
    if (n == name) return f;
  return FindSequenceFilter(name);
}

}  // namespace tq::jinja
