// Methods of Python's str, dict, list and tuple that templates call (`s.strip()`,
// `d.items()`, ...). The immutable sandbox refuses the mutating ones.
#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {
namespace {

using Method = Value (*)(Evaluator& ev, const Value& self, CallArgs& args);

const std::string* OptStr(const Value& v, const char* fn) {
  if (v.is_undefined() || v.is_none()) return nullptr;
  if (!v.is_string()) ThrowRender(fmt::format("{} arg must be None or str", fn));
  return &v.str();
}

int64_t OptInt(const Value& v, int64_t dflt) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (v.kind() != Kind::kInt && v.kind() != Kind::kBool)
    ThrowRender(fmt::format("'{}' object cannot be interpreted as an integer", TypeName(v)));
  return v.int_value();
}

const std::string& StrArg(const Value& v, const char* fn) {
  if (!v.is_string())
    ThrowRender(fmt::format("{}() argument must be str, not {}", fn, TypeName(v)));
  return v.str();
}

Value StrList(std::vector<std::string> parts) {
  List out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::MakeList(std::move(out));
}

// self[start:end] by code points, for the optional start/end of find/startswith/count.
std::string SubRange(const Value& self, const Value& start, const Value& end) {
  if ((start.is_undefined() || start.is_none()) && (end.is_undefined() || end.is_none()))
    return self.str();
  return SliceValue(self, start, end, Value::None()).str();
}

Value Strip(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"chars"}, "strip");
  return Value(PyStrip(s.str(), OptStr(v[0], "strip"), true, true));
}
Value LStrip(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"chars"}, "lstrip");
  return Value(PyStrip(s.str(), OptStr(v[0], "lstrip"), true, false));
}
Value RStrip(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"chars"}, "rstrip");
  return Value(PyStrip(s.str(), OptStr(v[0], "rstrip"), false, true));
}
Value Split(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"sep", "maxsplit"}, "split");
  const std::string* sep = OptStr(v[0], "split");
  if (sep && sep->empty()) ThrowRender("empty separator");
  return StrList(PySplit(s.str(), sep, OptInt(v[1], -1)));
}
Value RSplit(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"sep", "maxsplit"}, "rsplit");
  const std::string* sep = OptStr(v[0], "rsplit");
  if (sep && sep->empty()) ThrowRender("empty separator");
  return StrList(PyRSplit(s.str(), sep, OptInt(v[1], -1)));
}
Value SplitLines(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "splitlines");
  return StrList(PySplitLines(s.str()));
}

// startswith/endswith: a str or a tuple of str.
bool AffixMatch(const Value& self, CallArgs& a, const char* fn, bool prefix) {
  auto v = BindArgs(a, {"prefix", "start", "end"}, fn);
  const std::string s = SubRange(self, v[1], v[2]);
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0
                  : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (v[0].kind() == Kind::kTuple) {
    for (const Value& p : v[0].list())
      if (one(StrArg(p, fn))) return true;
    return false;
  }
  if (!v[0].is_string())
    ThrowRender(
        fmt::format("{} first arg must be str or a tuple of str, not {}", fn, TypeName(v[0])));
  return one(v[0].str());
}
Value StartsWith(Evaluator&, const Value& s, CallArgs& a) {
  return Value(AffixMatch(s, a, "startswith", true));
}
Value EndsWith(Evaluator&, const Value& s, CallArgs& a) {
  return Value(AffixMatch(s, a, "endswith", false));
}
Value Upper(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "upper");
  return Value(ToUpper(s.str()));
}
Value Lower(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "lower");
  return Value(ToLower(s.str()));
}
Value Title(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "title");
  return Value(PyTitle(s.str()));
}
Value Capitalize(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "capitalize");
  return Value(PyCapitalize(s.str()));
}
Value Replace(Evaluator& ev, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"old", "new", "count"}, "replace");
  std::string out =
      PyReplace(s.str(), StrArg(v[0], "replace"), StrArg(v[1], "replace"), OptInt(v[2], -1));
  if (out.size() > ev.max_size()) ThrowRender("string is too large");
  return Value(std::move(out));
}
int64_t FindImpl(const Value& self, CallArgs& a, const char* fn, bool reverse) {
  auto v = BindArgs(a, {"sub", "start", "end"}, fn);
  const std::string& sub = StrArg(v[0], fn);
  const std::string hay = SubRange(self, v[1], v[2]);
  const size_t f = reverse ? hay.rfind(sub) : hay.find(sub);
  if (f == std::string::npos) return -1;
  int64_t offset = 0;
  if (!(v[1].is_undefined() || v[1].is_none())) {
    int64_t st = v[1].int_value();
    const int64_t n = static_cast<int64_t>(CodePointCount(self.str()));
    if (st < 0) st = std::max<int64_t>(0, st + n);
    offset = std::min(st, n);
  }
  return offset + static_cast<int64_t>(CodePointCount(std::string_view(hay).substr(0, f)));
}
Value Find(Evaluator&, const Value& s, CallArgs& a) { return Value(FindImpl(s, a, "find", false)); }
Value RFind(Evaluator&, const Value& s, CallArgs& a) {
  return Value(FindImpl(s, a, "rfind", true));
}
Value Index(Evaluator&, const Value& s, CallArgs& a) {
  const int64_t i = FindImpl(s, a, "index", false);
  if (i < 0) ThrowRender("substring not found");
  return Value(i);
}
Value Count(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"sub", "start", "end"}, "count");
  const std::string& sub = StrArg(v[0], "count");
  const std::string hay = SubRange(s, v[1], v[2]);
  if (sub.empty()) return Value(static_cast<int64_t>(CodePointCount(hay) + 1));
  int64_t n = 0;
  for (size_t p = hay.find(sub); p != std::string::npos; p = hay.find(sub, p + sub.size())) ++n;
  return Value(n);
}
Value Join(Evaluator& ev, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"iterable"}, "join");
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(v[0])) {
    if (!item.is_string())
      ThrowRender(fmt::format("sequence item: expected str instance, {} found", TypeName(item)));
    if (!first) out += s.str();
    first = false;
    out += item.str();
    if (out.size() > ev.max_size()) ThrowRender("string is too large");
  }
  return Value(std::move(out));
}
Value Format(Evaluator& ev, const Value& s, CallArgs& a) {
  return Value(PyStrFormat(ev, s.str(), a));
}
template <bool (*Pred)(char32_t)>
Value CharClass(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "is...");
  const std::u32string u = DecodeUtf8(s.str());
  if (u.empty()) return Value(false);
  for (char32_t c : u)
    if (!Pred(c)) return Value(false);
  return Value(true);
}
bool IsAlnumCp(char32_t c) { return IsPyAlpha(c) || IsPyDigit(c); }
Value IsLower(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "islower");
  bool cased = false;
  for (char32_t c : DecodeUtf8(s.str())) {
    if (IsPyUpper(c)) return Value(false);
    cased |= IsPyLower(c);
  }
  return Value(cased);
}
Value IsUpper(Evaluator&, const Value& s, CallArgs& a) {
  BindArgs(a, {}, "isupper");
  bool cased = false;
  for (char32_t c : DecodeUtf8(s.str())) {
    if (IsPyLower(c)) return Value(false);
    cased |= IsPyUpper(c);
  }
  return Value(cased);
}
Value Pad(const Value& s, CallArgs& a, const char* fn, int where) {
  auto v = BindArgs(a, {"width", "fillchar"}, fn);
  const int64_t width = OptInt(v[0], 0);
  std::string fill = v[1].is_undefined() ? " " : StrArg(v[1], fn);
  if (CodePointCount(fill) != 1)
    ThrowRender("The fill character must be exactly one character long");
  const int64_t len = static_cast<int64_t>(CodePointCount(s.str()));
  if (width <= len) return s;
  const int64_t total = std::min<int64_t>(width - len, 1 << 24);
  int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s.str();
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}
Value LJust(Evaluator&, const Value& s, CallArgs& a) { return Pad(s, a, "ljust", -1); }
Value RJust(Evaluator&, const Value& s, CallArgs& a) { return Pad(s, a, "rjust", 1); }
Value Center(Evaluator&, const Value& s, CallArgs& a) { return Pad(s, a, "center", 0); }
Value ZFill(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"width"}, "zfill");
  const int64_t width = std::min<int64_t>(OptInt(v[0], 0), 1 << 24);
  std::string str = s.str();
  const int64_t len = static_cast<int64_t>(CodePointCount(str));
  if (width <= len) return s;
  std::string sign;
  if (!str.empty() && (str[0] == '+' || str[0] == '-')) {
    sign = str.substr(0, 1);
    str.erase(0, 1);
  }
  return Value(sign + std::string(static_cast<size_t>(width - len), '0') + str);
}
Value RemovePrefix(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"prefix"}, "removeprefix");
  const std::string& p = StrArg(v[0], "removeprefix");
  if (s.str().compare(0, p.size(), p) == 0) return Value(s.str().substr(p.size()));
  return s;
}
Value RemoveSuffix(Evaluator&, const Value& s, CallArgs& a) {
  auto v = BindArgs(a, {"suffix"}, "removesuffix");
  const std::string& p = StrArg(v[0], "removesuffix");
  if (!p.empty() && s.str().size() >= p.size() &&
      s.str().compare(s.str().size() - p.size(), p.size(), p) == 0)
    return Value(s.str().substr(0, s.str().size() - p.size()));
  return s;
}
Value Partition(const Value& s, CallArgs& a, bool reverse) {
  auto v = BindArgs(a, {"sep"}, reverse ? "rpartition" : "partition");
  const std::string& sep = StrArg(v[0], "partition");
  if (sep.empty()) ThrowRender("empty separator");
  const size_t f = reverse ? s.str().rfind(sep) : s.str().find(sep);
  if (f == std::string::npos) {
    if (reverse) return Value::MakeTuple({Value(""), Value(""), s});
    return Value::MakeTuple({s, Value(""), Value("")});
  }
  return Value::MakeTuple(
      {Value(s.str().substr(0, f)), Value(sep), Value(s.str().substr(f + sep.size()))});
}
Value PartitionM(Evaluator&, const Value& s, CallArgs& a) { return Partition(s, a, false); }
Value RPartitionM(Evaluator&, const Value& s, CallArgs& a) { return Partition(s, a, true); }

// --- dict ---------------------------------------------------------------------------------
Value Items(Evaluator&, const Value& d, CallArgs& a) {
  BindArgs(a, {}, "items");
  List out;
  out.reserve(d.dict().items.size());
  for (auto& [k, v] : d.dict().items) out.push_back(Value::MakeTuple({k, v}));
  return Value::MakeList(std::move(out));
}
Value Keys(Evaluator&, const Value& d, CallArgs& a) {
  BindArgs(a, {}, "keys");
  List out;
  for (auto& kv : d.dict().items) out.push_back(kv.first);
  return Value::MakeList(std::move(out));
}
Value Values(Evaluator&, const Value& d, CallArgs& a) {
  BindArgs(a, {}, "values");
  List out;
  for (auto& kv : d.dict().items) out.push_back(kv.second);
  return Value::MakeList(std::move(out));
}
Value Get(Evaluator&, const Value& d, CallArgs& a) {
  auto v = BindArgs(a, {"key", "default"}, "get");
  if (const Value* found = d.dict().Find(v[0])) return *found;
  return v[1].is_undefined() ? Value::None() : v[1];
}
Value Copy(Evaluator&, const Value& d, CallArgs& a) {
  BindArgs(a, {}, "copy");
  if (d.is_mapping()) {
    Value out = Value::MakeDict();
    out.dict().items = d.dict().items;
    out.dict().depth = d.dict().depth;
    return out;
  }
  return Value::MakeList(d.list());
}

// --- list / tuple -------------------------------------------------------------------------
Value ListIndex(Evaluator&, const Value& l, CallArgs& a) {
  auto v = BindArgs(a, {"value"}, "index");
  for (size_t i = 0; i < l.list().size(); ++i)
    if (Equals(l.list()[i], v[0])) return Value(static_cast<int64_t>(i));
  ThrowRender(fmt::format("{} is not in list", Repr(v[0])));
}
Value ListCount(Evaluator&, const Value& l, CallArgs& a) {
  auto v = BindArgs(a, {"value"}, "count");
  int64_t n = 0;
  for (const Value& x : l.list()) n += Equals(x, v[0]);
  return Value(n);
}

struct Entry {
  std::string_view name;
  Method fn;
};

const Entry kStrMethods[] = {
    {"strip", Strip},
    {"lstrip", LStrip},
    {"rstrip", RStrip},
    {"split", Split},
    {"rsplit", RSplit},
    {"splitlines", SplitLines},
    {"startswith", StartsWith},
    {"endswith", EndsWith},
    {"upper", Upper},
    {"lower", Lower},
    {"casefold", Lower},
    {"title", Title},
    {"capitalize", Capitalize},
    {"replace", Replace},
    {"find", Find},
    {"rfind", RFind},
    {"index", Index},
    {"count", Count},
    {"join", Join},
    {"format", Format},
    {"isdigit", CharClass<IsPyDigit>},
    {"isnumeric", CharClass<IsPyDigit>},
    {"isdecimal", CharClass<IsPyDigit>},
    {"isalpha", CharClass<IsPyAlpha>},
    {"isalnum", CharClass<IsAlnumCp>},
    {"isspace", CharClass<IsPySpace>},
    {"islower", IsLower},
    {"isupper", IsUpper},
    {"ljust", LJust},
    {"rjust", RJust},
    {"center", Center},
    {"zfill", ZFill},
    {"removeprefix", RemovePrefix},
    {"removesuffix", RemoveSuffix},
    {"partition", PartitionM},
    {"rpartition", RPartitionM},
};

const Entry kDictMethods[] = {
    {"items", Items}, {"keys", Keys}, {"values", Values}, {"get", Get}, {"copy", Copy},
};

const Entry kListMethods[] = {{"index", ListIndex}, {"count", ListCount}, {"copy", Copy}};
const Entry kTupleMethods[] = {{"index", ListIndex}, {"count", ListCount}};

const std::string_view kListMutators[] = {"append", "clear", "pop",    "reverse",
                                          "insert", "sort",  "extend", "remove"};
const std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
Value Bind(const Entry (&table)[N], const Value& obj, const std::string& name) {
  for (const Entry& e : table) {
    if (e.name != name) continue;
    const Method fn = e.fn;
    return MakeFunction(
        std::string(TypeName(obj)) + "." + name,
        [fn, obj](Evaluator& ev, CallArgs& a) { return fn(ev, obj, a); }, obj.depth() + 1);
  }
  return Value();
}

Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, TypeName(obj)));
}

}  // namespace

Value FindMethod(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kString:
      return Bind(kStrMethods, obj, name);
    case Kind::kDict:
      for (auto m : kDictMutators)
        if (m == name) return Unsafe(obj, name);
      return Bind(kDictMethods, obj, name);
    case Kind::kList:
      for (auto m : kListMutators)
        if (m == name) return Unsafe(obj, name);
      return Bind(kListMethods, obj, name);
    case Kind::kTuple:
      return Bind(kTupleMethods, obj, name);
    default:
      return Value();
  }
}

}  // namespace tq::jinja
