#include "tokenizer/jinja/json_dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tokenizer/jinja/text.h"

namespace tq::jinja {
namespace {

constexpr int kMaxDepth = 500;

void AppendEscaped(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  auto hex4 = [&out](unsigned v) { out += fmt::format("\\u{:04x}", v); };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      hex4(c);
    } else if (c < 0x80 || !ensure_ascii) {
      out.push_back(static_cast<char>(c));
    } else {
      // Decode one code point; escape as \uXXXX (surrogate pairs above the BMP), as Python does.
      size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
      if (i + len > s.size()) len = 1;
      const std::u32string cp = DecodeUtf8(std::string_view(s).substr(i, len));
      const char32_t u = cp.empty() ? c : cp[0];
      if (u >= 0x10000) {
        const char32_t v = u - 0x10000;
        hex4(0xD800 + (v >> 10));
        hex4(0xDC00 + (v & 0x3FF));
      } else {
        hex4(u);
      }
      i += (cp.size() == 1 ? len : 1) - 1;
    }
  }
  out.push_back('"');
}

std::string FloatJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return PyReprFloat(d);
}

std::string KeyString(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return k.str();
    case Kind::kInt:
      return std::to_string(k.int_value());
    case Kind::kFloat:
      return FloatJson(k.float_value());
    case Kind::kBool:
      return k.bool_value() ? "true" : "false";
    case Kind::kNone:
      return "null";
    default:
      ThrowRender(fmt::format("keys must be str, int, float, bool or None, not {}", TypeName(k)));
  }
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {}

  void Dump(const Value& v, int level) {
    if (level > kMaxDepth) ThrowRender("maximum recursion depth exceeded in tojson");
    switch (v.kind()) {
      case Kind::kNone:
        out_ += "null";
        return;
      case Kind::kBool:
        out_ += v.bool_value() ? "true" : "false";
        return;
      case Kind::kInt:
        out_ += std::to_string(v.int_value());
        return;
      case Kind::kFloat:
        out_ += FloatJson(v.float_value());
        return;
      case Kind::kString:
        AppendEscaped(out_, v.str(), o_.ensure_ascii);
        return;
      case Kind::kList:
      case Kind::kTuple: {
        const List& items = v.list();
        if (items.empty()) {
          out_ += "[]";
          return;
        }
        out_ += "[";
        for (size_t i = 0; i < items.size(); ++i) {
          Separator(i == 0, level + 1);
          Dump(items[i], level + 1);
        }
        Close(level);
        out_ += "]";
        return;
      }
      case Kind::kDict: {
        if (v.dict().items.empty()) {
          out_ += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        for (auto& [k, val] : v.dict().items) entries.emplace_back(KeyString(k), &val);
        if (o_.sort_keys)
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto& a, auto& b) { return a.first < b.first; });
        out_ += "{";
        for (size_t i = 0; i < entries.size(); ++i) {
          Separator(i == 0, level + 1);
          AppendEscaped(out_, entries[i].first, o_.ensure_ascii);
          out_ += o_.key_separator;
          Dump(*entries[i].second, level + 1);
        }
        Close(level);
        out_ += "}";
        return;
      }
      default:
        ThrowRender(fmt::format("Object of type {} is not JSON serializable", TypeName(v)));
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  void Separator(bool first, int level) {
    if (!first) out_ += o_.item_separator;
    if (o_.indent) {
      out_.push_back('\n');
      for (int i = 0; i < level; ++i) out_ += *o_.indent;
    }
  }
  void Close(int level) {
    if (!o_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *o_.indent;
  }

  const JsonDumpOptions& o_;
  std::string out_;
};

}  // namespace

std::string PyJsonDumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  d.Dump(v, 0);
  return d.Take();
}

}  // namespace tq::jinja
