// Global functions (range, dict, namespace, joiner, cycler, raise_exception, strftime_now) and
// Python-style argument binding for every builtin.
#include <fmt/format.h>

#include <ctime>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/evaluator.h"

namespace tq::jinja {

std::vector<Value> BindArgs(CallArgs& args, std::initializer_list<const char*> names,
                            std::string_view fn_name) {
  std::vector<Value> out(names.size());
  std::vector<bool> set(names.size(), false);
  if (args.pos.size() > names.size())
    ThrowRender(fmt::format("{}() takes at most {} argument(s) ({} given)", fn_name, names.size(),
                            args.pos.size()));
  for (size_t i = 0; i < args.pos.size(); ++i) {
    out[i] = args.pos[i];
    set[i] = true;
  }
  for (auto& [k, v] : args.kw) {
    size_t idx = 0;
    for (const char* n : names) {
      if (k == n) break;
      ++idx;
    }
    if (idx == names.size())
      ThrowRender(fmt::format("{}() got an unexpected keyword argument '{}'", fn_name, k));
    if (set[idx])
      ThrowRender(fmt::format("{}() got multiple values for argument '{}'", fn_name, k));
    out[idx] = v;
    set[idx] = true;
  }
  return out;
}

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

int64_t IntArg(const Value& v, const char* fn) {
  if (v.kind() != Kind::kInt && v.kind() != Kind::kBool)
    ThrowRender(
        fmt::format("'{}' object cannot be interpreted as an integer ({})", TypeName(v), fn));
  return v.int_value();
}

Value Range(Evaluator&, CallArgs& a) {
  if (!a.kw.empty()) ThrowRender("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    ThrowRender(fmt::format("range expected 1 to 3 arguments, got {}", a.pos.size()));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = IntArg(a.pos[0], "range");
  } else {
    start = IntArg(a.pos[0], "range");
    stop = IntArg(a.pos[1], "range");
    if (a.pos.size() == 3) step = IntArg(a.pos[2], "range");
  }
  if (step == 0) ThrowRender("range() arg 3 must not be zero");
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 astep = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 n = span <= 0 ? 0 : (span + astep - 1) / astep;
  if (n > kMaxRange)
    ThrowRender(fmt::format("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                            kMaxRange));
  List out;
  out.reserve(static_cast<size_t>(n));
  for (__int128 i = 0; i < n; ++i) out.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::MakeList(std::move(out));
}

// dict(*args, **kwargs) into `d`: a mapping or an iterable of pairs, then the keywords.
void FillDict(Dict& d, CallArgs& a, const char* fn) {
  if (a.pos.size() > 1)
    ThrowRender(fmt::format("{} expected at most 1 argument, got {}", fn, a.pos.size()));
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.kind() == Kind::kDict || src.kind() == Kind::kNamespace) {
      for (auto& [k, v] : src.dict().items) d.Set(k, v);
    } else {
      for (const Value& pair : Iterate(src)) {
        List kv = Iterate(pair);
        if (kv.size() != 2)
          ThrowRender(fmt::format("{} update sequence element has length {}; 2 is required", fn,
                                  kv.size()));
        d.Set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d.Set(Value(k), v);
}

Value MakeDictFn(Evaluator&, CallArgs& a) {
  Value d = Value::MakeDict();
  FillDict(d.dict(), a, "dict");
  return d;
}

Value MakeNamespaceFn(Evaluator& ev, CallArgs& a) {
  Value d = Value::MakeNamespace();
  ev.TrackNamespace(d);
  FillDict(d.dict(), a, "namespace");
  return d;
}

Value Joiner(Evaluator&, CallArgs& a) {
  auto v = BindArgs(a, {"sep"}, "joiner");
  const std::string sep = v[0].is_undefined() ? ", " : ToStr(v[0]);
  auto used = std::make_shared<bool>(false);
  return MakeFunction("joiner", [sep, used](Evaluator&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value(std::string());
    }
    return Value(sep);
  });
}

Value RaiseException(Evaluator&, CallArgs& a) {
  auto v = BindArgs(a, {"message"}, "raise_exception");
  ThrowRender(ToStr(v[0]));
}

Value StrftimeNow(Evaluator&, CallArgs& a) {
  auto v = BindArgs(a, {"format"}, "strftime_now");
  if (!v[0].is_string()) ThrowRender("strftime_now() argument must be str");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, v[0].str().c_str(), &tm);
  if (n == 0 && !v[0].str().empty()) ThrowRender("strftime_now(): format is too long");
  return Value(std::string(buf, n));
}

}  // namespace

void AddGlobals(Dict& globals) {
  globals.Set(Value("range"), MakeFunction("range", Range));
  globals.Set(Value("dict"), MakeFunction("dict", MakeDictFn));
  globals.Set(Value("namespace"), MakeFunction("namespace", MakeNamespaceFn));
  globals.Set(Value("joiner"), MakeFunction("joiner", Joiner));
  globals.Set(Value("raise_exception"), MakeFunction("raise_exception", RaiseException));
  globals.Set(Value("strftime_now"), MakeFunction("strftime_now", StrftimeNow));
}

}  // namespace tq::jinja
