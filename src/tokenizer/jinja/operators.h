// Python's arithmetic and comparison operators on Jinja values.
#pragma once

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace tq::jinja {

// a <op> b with Python semantics (int/float promotion, str/list concatenation and repetition,
// floor division and modulo rounding toward -inf, ZeroDivisionError, checked int64 overflow).
// `max_size` bounds the length of strings/lists an operator may build.
Value BinaryOp(BinOp op, const Value& a, const Value& b, size_t max_size);
bool CompareOp(CmpOp op, const Value& a, const Value& b);
Value Negate(const Value& v);
Value UnaryPlus(const Value& v);

// Python slicing of lists, tuples and strings; start/stop/step may be None/undefined.
Value SliceValue(const Value& obj, const Value& start, const Value& stop, const Value& step);
// obj[i] for sequences and strings with Python negative indexing; nullopt when out of range.
bool IndexSequence(const Value& obj, int64_t index, Value* out);

}  // namespace tq::jinja
