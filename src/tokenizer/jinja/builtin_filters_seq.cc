// Jinja's filters over sequences and mappings: map/select/sort/join/... (jinja2.filters).
#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/jinja/filter_util.h"
#include "tokenizer/jinja/operators.h"

namespace tq::jinja {
namespace {

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

Value Sum(Evaluator& ev, const Value& v, CallArgs& a) {
  auto p = BindArgs(a, {"attribute", "start"}, "sum");
  Value total = Given(p[1]) ? p[1] : Value(0);
  for (const Value& item : Iterate(v))
    total =
        BinaryOp(BinOp::kAdd, total,
                 Given(p[0]) && !p[0].is_none() ? GetPath(ev, item, p[0]) : item, ev.max_size());
  return total;
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

const std::pair<std::string_view, FilterFn> kSequenceFilters[] = {
    {"batch", Batch},
    {"count", Length},
    {"dictsort", DictSort},
    {"first", First},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", Length},
    {"list", ListF},
    {"map", Map},
    {"max", Max},
    {"min", Min},
    {"reject", Reject},
    {"rejectattr", RejectAttr},
    {"reverse", Reverse},
    {"select", Select},
    {"selectattr", SelectAttr},
    {"slice", Slice},
    {"sort", Sort},
    {"sum", Sum},
    {"unique", Unique},
};

}  // namespace

FilterFn FindSequenceFilter(std::string_view name) {
  for (const auto& [n, f] : kSequenceFilters)
    if (n == name) return f;
  return nullptr;
}

}  // namespace tq::jinja
