// Shared by the filter files: argument helpers and Jinja's attribute getter.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {

inline bool Given(const Value& v) { return !v.is_undefined(); }

inline bool BoolArg(const Value& v, bool dflt) { return Given(v) ? Truthy(v) : dflt; }

inline int64_t IntArg(const Value& v, int64_t dflt, const char* fn) {
  if (!Given(v)) return dflt;
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return v.int_value();
  if (v.kind() == Kind::kFloat) return static_cast<int64_t>(v.float_value());
  ThrowRender(fmt::format("{}: expected an integer, got {}", fn, TypeName(v)));
}

// Jinja's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
inline Value GetPath(Evaluator& ev, Value v, const Value& attribute) {
  if (!attribute.is_string()) return ev.GetItem(v, attribute);
  static const std::string kDot = ".";
  for (const std::string& part : PySplit(attribute.str(), &kDot, -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    v = ev.GetItem(v, digits ? Value(static_cast<int64_t>(std::atoll(part.c_str()))) : Value(part));
  }
  return v;
}

inline Value IgnoreCase(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(ToLower(v.str()));
  return v;
}

// The sequence filters (builtin_filters_seq.cc).
FilterFn FindSequenceFilter(std::string_view name);

}  // namespace tq::jinja
