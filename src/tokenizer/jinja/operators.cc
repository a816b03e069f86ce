#include "tokenizer/jinja/operators.h"

#include <fmt/format.h>

#include <cmath>

#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {
namespace {

bool IsIntLike(const Value& v) { return v.kind() == Kind::kInt || v.kind() == Kind::kBool; }

[[noreturn]] void Unsupported(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  ThrowRender(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, TypeName(a),
                          TypeName(b)));
}

int64_t CheckedInt(__int128 v) {
  if (v > INT64_MAX || v < INT64_MIN) ThrowRender("integer overflow (beyond 64 bits)");
  return static_cast<int64_t>(v);
}

int64_t FloorDivInt(int64_t a, int64_t b) {
  if (b == 0) ThrowRender("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) ThrowRender("integer overflow (beyond 64 bits)");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ModInt(int64_t a, int64_t b) {
  if (b == 0) ThrowRender("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python's float divmod: the remainder takes the divisor's sign and the quotient is snapped to
// the nearest integer of (a - mod) / b, so 1 // 0.1 == 9.0 as in CPython.
void FloatDivMod(double a, double b, double* floordiv, double* mod) {
  if (b == 0) ThrowRender("float divmod()");
  *mod = std::fmod(a, b);
  double div = (a - *mod) / b;
  if (*mod != 0) {
    if ((b < 0) != (*mod < 0)) {
      *mod += b;
      div -= 1.0;
    }
  } else {
    *mod = std::copysign(0.0, b);
  }
  if (div != 0) {
    *floordiv = std::floor(div);
    if (div - *floordiv > 0.5) *floordiv += 1.0;
  } else {
    *floordiv = std::copysign(0.0, a / b);
  }
}

double ModFloat(double a, double b) {
  if (b == 0) ThrowRender("float modulo");
  double q, m;
  FloatDivMod(a, b, &q, &m);
  return m;
}

Value Repeat(const Value& seq, int64_t n, size_t max_size) {
  if (n <= 0)
    return seq.is_string()
               ? Value(std::string())
               : (seq.kind() == Kind::kTuple ? Value::MakeTuple({}) : Value::MakeList());
  if (seq.is_string()) {
    if (seq.str().size() * static_cast<unsigned __int128>(n) > max_size)
      ThrowRender("string repetition result is too large");
    std::string out;
    out.reserve(seq.str().size() * n);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  if (seq.list().size() * static_cast<unsigned __int128>(n) > max_size)
    ThrowRender("list repetition result is too large");
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return seq.kind() == Kind::kTuple ? Value::MakeTuple(std::move(out))
                                    : Value::MakeList(std::move(out));
}

Value Power(const Value& a, const Value& b) {
  if (IsIntLike(a) && IsIntLike(b) && b.int_value() >= 0) {
    __int128 result = 1, base = a.int_value();
    int64_t e = b.int_value();
    while (e > 0) {
      if (e & 1) result = CheckedInt(result * base);
      e >>= 1;
      if (e > 0) base = CheckedInt(base * base);
    }
    return Value(CheckedInt(result));
  }
  const double x = a.float_value(), y = b.float_value();
  if (x == 0 && y < 0) ThrowRender("0.0 cannot be raised to a negative power");
  return Value(std::pow(x, y));
}

}  // namespace

Value BinaryOp(BinOp op, const Value& a, const Value& b, size_t max_size) {
  const bool nums = a.is_number() && b.is_number();
  const bool ints = IsIntLike(a) && IsIntLike(b);
  switch (op) {
    case BinOp::kConcat: {
      std::string s = ToStr(a) + ToStr(b);
      if (s.size() > max_size) ThrowRender("string is too large");
      return Value(std::move(s));
    }
    case BinOp::kAdd:
      if (ints) return Value(CheckedInt(static_cast<__int128>(a.int_value()) + b.int_value()));
      if (nums) return Value(a.float_value() + b.float_value());
      if (a.is_string() && b.is_string()) {
        if (a.str().size() + b.str().size() > max_size) ThrowRender("string is too large");
        return Value(a.str() + b.str());
      }
      if (a.is_sequence() && a.kind() == b.kind()) {
        List out = a.list();
        out.insert(out.end(), b.list().begin(), b.list().end());
        if (out.size() > max_size) ThrowRender("list is too large");
        return a.kind() == Kind::kTuple ? Value::MakeTuple(std::move(out))
                                        : Value::MakeList(std::move(out));
      }
      if (a.is_string() && (b.is_number() || b.is_none()))
        ThrowRender(fmt::format("can only concatenate str (not \"{}\") to str", TypeName(b)));
      Unsupported("+", a, b);
    case BinOp::kSub:
      if (ints) return Value(CheckedInt(static_cast<__int128>(a.int_value()) - b.int_value()));
      if (nums) return Value(a.float_value() - b.float_value());
      Unsupported("-", a, b);
    case BinOp::kMul:
      if (ints) return Value(CheckedInt(static_cast<__int128>(a.int_value()) * b.int_value()));
      if (nums) return Value(a.float_value() * b.float_value());
      if ((a.is_string() || a.is_sequence()) && IsIntLike(b))
        return Repeat(a, b.int_value(), max_size);
      if ((b.is_string() || b.is_sequence()) && IsIntLike(a))
        return Repeat(b, a.int_value(), max_size);
      Unsupported("*", a, b);
    case BinOp::kDiv:
      if (nums) {
        if (b.float_value() == 0) ThrowRender("division by zero");
        return Value(a.float_value() / b.float_value());
      }
      Unsupported("/", a, b);
    case BinOp::kFloorDiv:
      if (ints) return Value(FloorDivInt(a.int_value(), b.int_value()));
      if (nums) {
        if (b.float_value() == 0) ThrowRender("float floor division by zero");
        double q, m;
        FloatDivMod(a.float_value(), b.float_value(), &q, &m);
        return Value(q);
      }
      Unsupported("//", a, b);
    case BinOp::kMod:
      if (ints) return Value(ModInt(a.int_value(), b.int_value()));
      if (nums) return Value(ModFloat(a.float_value(), b.float_value()));
      if (a.is_string()) return Value(PyPercentFormat(a.str(), b));
      Unsupported("%", a, b);
    case BinOp::kPow:
      if (nums) return Power(a, b);
      Unsupported("** or pow()", a, b);
  }
  ThrowRender("bad operator");
}

bool CompareOp(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq:
      return Equals(a, b);
    case CmpOp::kNe:
      return !Equals(a, b);
    case CmpOp::kLt:
      return CompareValues(a, b) < 0;
    case CmpOp::kLe:
      return CompareValues(a, b) <= 0;
    case CmpOp::kGt:
      return CompareValues(a, b) > 0;
    case CmpOp::kGe:
      return CompareValues(a, b) >= 0;
    case CmpOp::kIn:
      return Contains(b, a);
    case CmpOp::kNotIn:
      return !Contains(b, a);
  }
  return false;
}

Value Negate(const Value& v) {
  if (IsIntLike(v)) return Value(CheckedInt(-static_cast<__int128>(v.int_value())));
  if (v.kind() == Kind::kFloat) return Value(-v.float_value());
  if (v.is_undefined()) FailUndefined(v);
  ThrowRender(fmt::format("bad operand type for unary -: '{}'", TypeName(v)));
}

Value UnaryPlus(const Value& v) {
  if (IsIntLike(v)) return Value(v.int_value());
  if (v.kind() == Kind::kFloat) return v;
  if (v.is_undefined()) FailUndefined(v);
  ThrowRender(fmt::format("bad operand type for unary +: '{}'", TypeName(v)));
}

namespace {

int64_t SliceIndex(const Value& v, bool* present) {
  *present = !(v.is_none() || v.is_undefined());
  if (!*present) return 0;
  if (!IsIntLike(v))
    ThrowRender("slice indices must be integers or None or have an __index__ method");
  return v.int_value();
}

}  // namespace

Value SliceValue(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  bool has_start, has_stop, has_step;
  int64_t start = SliceIndex(start_v, &has_start), stop = SliceIndex(stop_v, &has_stop),
          step = SliceIndex(step_v, &has_step);
  if (!has_step) step = 1;
  if (step == 0) ThrowRender("slice step cannot be zero");
  std::u32string chars;
  int64_t len;
  if (obj.is_string()) {
    chars = DecodeUtf8(obj.str());
    len = static_cast<int64_t>(chars.size());
  } else {
    len = static_cast<int64_t>(obj.list().size());
  }
  auto adjust = [&](int64_t i, bool has, bool is_start) {
    if (!has) return step > 0 ? (is_start ? 0 : len) : (is_start ? len - 1 : -1);
    if (i < 0) {
      i += len;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= len) {
      i = step < 0 ? len - 1 : len;
    }
    return i;
  };
  start = adjust(start, has_start, true);
  stop = adjust(stop, has_stop, false);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : idx) out.push_back(chars[i]);
    return Value(EncodeUtf8(out));
  }
  List out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.list()[i]);
  return obj.kind() == Kind::kTuple ? Value::MakeTuple(std::move(out))
                                    : Value::MakeList(std::move(out));
}

bool IndexSequence(const Value& obj, int64_t index, Value* out) {
  if (obj.is_string()) {
    if (IsAscii(obj.str())) {
      const int64_t n = static_cast<int64_t>(obj.str().size());
      if (index < 0) index += n;
      if (index < 0 || index >= n) return false;
      *out = Value(std::string(1, obj.str()[index]));
      return true;
    }
    const std::u32string chars = DecodeUtf8(obj.str());
    const int64_t n = static_cast<int64_t>(chars.size());
    if (index < 0) index += n;
    if (index < 0 || index >= n) return false;
    std::string s;
    AppendUtf8(s, chars[index]);
    *out = Value(std::move(s));
    return true;
  }
  const List& l = obj.list();
  const int64_t n = static_cast<int64_t>(l.size());
  if (index < 0) index += n;
  if (index < 0 || index >= n) return false;
  *out = l[index];
  return true;
}

}  // namespace tq::jinja
