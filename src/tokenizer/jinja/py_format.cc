#include "tokenizer/jinja/py_format.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/text.h"

namespace tq::jinja {

namespace {

bool Cased(char32_t c) { return IsPyUpper(c) || IsPyLower(c); }

struct Spec {
  std::string fill = " ";
  char align = 0;
  char sign = '-';
  bool zero = false;
  int64_t width = -1;
  bool comma = false;
  int64_t precision = -1;
  char type = 0;
};

Spec ParseSpec(const std::string& s) {
  Spec sp;
  const std::u32string u = DecodeUtf8(s);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (u.size() >= 2 && is_align(u[1])) {
    sp.fill.clear();
    AppendUtf8(sp.fill, u[0]);
    sp.align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && is_align(u[0])) {
    sp.align = static_cast<char>(u[0]);
    i = 1;
  }
  if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' '))
    sp.sign = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '0') {
    sp.zero = true;
    ++i;
  }
  int64_t w = -1;
  while (i < u.size() && u[i] >= '0' && u[i] <= '9' && w < (1 << 20))
    w = (w < 0 ? 0 : w * 10) + (u[i++] - '0');
  sp.width = w;
  if (i < u.size() && u[i] == ',') {
    sp.comma = true;
    ++i;
  }
  if (i < u.size() && u[i] == '.') {
    ++i;
    int64_t p = 0;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9' && p < (1 << 20)) p = p * 10 + (u[i++] - '0');
    sp.precision = p;
  }
  if (i < u.size()) sp.type = static_cast<char>(u[i++]);
  if (i != u.size()) ThrowRender("Invalid format specifier");
  return sp;
}

const std::string kZero = "0";

std::string Align(std::string body, const Spec& sp, bool numeric) {
  const int64_t len = static_cast<int64_t>(CodePointCount(body));
  if (sp.width <= len) return body;
  const int64_t pad = sp.width - len;
  char align = sp.align ? sp.align : (numeric ? '>' : '<');
  const bool zero_pad = sp.zero && !sp.align;
  if (zero_pad) align = '=';
  const std::string& fill = zero_pad ? kZero : sp.fill;
  auto rep = [&](int64_t n) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += fill;
    return out;
  };
  switch (align) {
    case '<':
      body.append(rep(pad));
      return body;
    case '^':
      return rep(pad / 2) + body + rep(pad - pad / 2);
    case '=': {
      size_t sign_len =
          (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
      return body.substr(0, sign_len) + rep(pad) + body.substr(sign_len);
    }
    default:
      return rep(pad) + body;
  }
}

std::string FormatNumber(const Value& v, const Spec& sp) {
  char type = sp.type;
  std::string body;
  const bool is_int = v.kind() == Kind::kInt || v.kind() == Kind::kBool;
  if (type == 0) type = is_int ? 'd' : (sp.precision >= 0 ? 'g' : 'r');
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'c') {
    if (!is_int)
      ThrowRender(fmt::format("Unknown format code '{}' for object of type 'float'", type));
    const int64_t x = v.int_value();
    const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
    switch (type) {
      case 'x':
        body = fmt::format("{:x}", mag);
        break;
      case 'X':
        body = fmt::format("{:X}", mag);
        break;
      case 'o':
        body = fmt::format("{:o}", mag);
        break;
      case 'b':
        body = fmt::format("{:b}", mag);
        break;
      case 'c':
        AppendUtf8(body, static_cast<char32_t>(mag));
        break;
      default:
        body = sp.comma ? fmt::format("{:L}", mag) : std::to_string(mag);
    }
    if (x < 0)
      body = "-" + body;
    else if (sp.sign == '+')
      body = "+" + body;
    else if (sp.sign == ' ')
      body = " " + body;
    return body;
  }
  const double d = v.float_value();
  const int prec = sp.precision >= 0 ? static_cast<int>(std::min<int64_t>(sp.precision, 100)) : 6;
  switch (type) {
    case 'f':
    case 'F':
      body = fmt::format("{:.{}f}", std::fabs(d), prec);
      break;
    case 'e':
    case 'E':
      body = type == 'e' ? fmt::format("{:.{}e}", std::fabs(d), prec)
                         : fmt::format("{:.{}E}", std::fabs(d), prec);
      break;
    case 'g':
    case 'G': {
      char buf[512];
      std::snprintf(buf, sizeof buf, type == 'g' ? "%.*g" : "%.*G", prec == 0 ? 1 : prec,
                    std::fabs(d));
      body = buf;
      break;
    }
    case '%':
      body = fmt::format("{:.{}f}%", std::fabs(d) * 100, prec);
      break;
    case 'r':
      body = PyReprFloat(std::fabs(d));
      break;
    default:
      ThrowRender(fmt::format("Unknown format code '{}' for object of type 'float'", type));
  }
  if (std::signbit(d) && !std::isnan(d))
    body = "-" + body;
  else if (sp.sign == '+')
    body = "+" + body;
  else if (sp.sign == ' ')
    body = " " + body;
  return body;
}

std::string FormatValue(const Value& v, const std::string& spec) {
  if (spec.empty()) return ToStr(v);
  const Spec sp = ParseSpec(spec);
  if (v.is_number() && sp.type != 's') return Align(FormatNumber(v, sp), sp, true);
  if (sp.type != 0 && sp.type != 's')
    ThrowRender(
        fmt::format("Unknown format code '{}' for object of type '{}'", sp.type, TypeName(v)));
  std::string s = ToStr(v);
  if (sp.precision >= 0) {
    const std::u32string u = DecodeUtf8(s);
    if (static_cast<int64_t>(u.size()) > sp.precision) s = EncodeUtf8(u.substr(0, sp.precision));
  }
  return Align(s, sp, false);
}

}  // namespace

std::string PyTitle(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    std::string ch;
    AppendUtf8(ch, c);
    if (Cased(c)) {
      out += prev_cased ? ToLower(ch) : UpperChar(c);
      prev_cased = true;
    } else {
      out += ch;
      prev_cased = false;
    }
  }
  return out;
}

std::string PyCapitalize(const std::string& s) {
  const std::u32string u = DecodeUtf8(s);
  if (u.empty()) return s;
  return UpperChar(u[0]) + ToLower(EncodeUtf8(std::u32string_view(u).substr(1)));
}

std::string PyStrFormat(Evaluator& ev, const std::string& f, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  size_t i = 0;
  while (i < f.size()) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      ThrowRender("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) ThrowRender("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    // First part: index, name or empty; then .attr / [key] accessors.
    size_t p = 0;
    while (p < field.size() && field[p] != '.' && field[p] != '[') ++p;
    const std::string head = field.substr(0, p);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.pos.size())
        ThrowRender("Replacement index out of range for positional args tuple");
      v = args.pos[auto_index++];
    } else if (std::all_of(head.begin(), head.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = std::stoul(head.substr(0, 9));
      if (idx >= args.pos.size())
        ThrowRender("Replacement index out of range for positional args tuple");
      v = args.pos[idx];
    } else {
      bool found = false;
      for (auto& [k, kv] : args.kw)
        if (k == head) v = kv, found = true;
      if (!found) ThrowRender(fmt::format("'{}'", head));
    }
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t e = p + 1;
        while (e < field.size() && field[e] != '.' && field[e] != '[') ++e;
        v = ev.GetAttr(v, field.substr(p + 1, e - p - 1));
        p = e;
      } else {
        const size_t e = field.find(']', p);
        if (e == std::string::npos) ThrowRender("Missing ']' in format string");
        const std::string key = field.substr(p + 1, e - p - 1);
        const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), [](char d) {
          return d >= '0' && d <= '9';
        });
        v = ev.GetItem(
            v, numeric ? Value(static_cast<int64_t>(std::stoll(key.substr(0, 18)))) : Value(key));
        p = e + 1;
      }
    }
    if (conv == "r") {
      v = Value(Repr(v));
    } else if (conv == "s") {
      v = Value(ToStr(v));
    } else if (!conv.empty()) {
      ThrowRender(fmt::format("Unknown conversion specifier {}", conv));
    }
    out += FormatValue(v, spec);
    if (out.size() > ev.max_size()) ThrowRender("string is too large");
  }
  return out;
}

std::string PyPercentFormat(const std::string& f, const Value& args) {
  List items;
  const bool mapping = args.is_mapping();
  // Python treats any non-tuple, non-str argument with __getitem__ as a possible mapping and then
  // does not complain about unused arguments ('abc' % [1] == 'abc').
  const bool lenient = mapping || args.kind() == Kind::kList || args.is_undefined();
  if (args.kind() == Kind::kTuple) {
    items = args.list();
  } else if (!mapping) {
    items.push_back(args);
  }
  size_t next = 0;
  std::string out;
  size_t i = 0;
  while (i < f.size()) {
    if (f[i] != '%') {
      out.push_back(f[i++]);
      continue;
    }
    ++i;
    if (i >= f.size()) ThrowRender("incomplete format");
    Value v;
    bool have = false;
    if (f[i] == '(') {
      const size_t e = f.find(')', i);
      if (e == std::string::npos || !mapping) ThrowRender("format requires a mapping");
      const Value* found = args.dict().Find(std::string_view(f).substr(i + 1, e - i - 1));
      if (!found) ThrowRender(fmt::format("'{}'", f.substr(i + 1, e - i - 1)));
      v = *found;
      have = true;
      i = e + 1;
    }
    Spec sp;
    while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) {
      if (f[i] == '-') sp.align = '<';
      if (f[i] == '+') sp.sign = '+';
      if (f[i] == ' ') sp.sign = ' ';
      if (f[i] == '0') sp.zero = true;
      ++i;
    }
    int64_t w = -1;
    while (i < f.size() && f[i] >= '0' && f[i] <= '9' && w < (1 << 20))
      w = (w < 0 ? 0 : w * 10) + (f[i++] - '0');
    sp.width = w;
    if (i < f.size() && f[i] == '.') {
      ++i;
      int64_t p = 0;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9' && p < (1 << 20))
        p = p * 10 + (f[i++] - '0');
      sp.precision = p;
    }
    if (i >= f.size()) ThrowRender("incomplete format");
    const char type = f[i++];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!have) {
      if (next >= items.size()) ThrowRender("not enough arguments for format string");
      v = items[next++];
    }
    if (sp.align == '<') sp.zero = false;
    if (!sp.align && !sp.zero) sp.align = '>';  // printf pads on the left unless '-'

    switch (type) {
      case 's':
        sp.type = 0;
        out += Align(
            sp.precision >= 0 ? EncodeUtf8(DecodeUtf8(ToStr(v)).substr(0, sp.precision)) : ToStr(v),
            sp, false);
        break;
      case 'r':
        out += Align(Repr(v), sp, false);
        break;
      case 'd':
      case 'i':
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number())
          ThrowRender(
              fmt::format("%{} format: a real number is required, not {}", type, TypeName(v)));
        Value num = v;
        if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o')
          num = Value(static_cast<int64_t>(v.float_value()));
        if (v.kind() != Kind::kFloat &&
            (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o'))
          num = Value(v.int_value());
        sp.type = (type == 'i') ? 'd' : type;
        if ((type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' ||
             type == 'G') &&
            num.kind() != Kind::kFloat)
          num = Value(num.float_value());
        out += Align(FormatNumber(num, sp), sp, true);
        break;
      }
      default:
        ThrowRender(fmt::format("unsupported format character '{}'", type));
    }
  }
  if (!lenient && next < items.size())
    ThrowRender("not all arguments converted during string formatting");
  return out;
}

}  // namespace tq::jinja
