#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace tq::tok {

namespace {

constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD

// Byte-level characters back to bytes; a token holding any other character is kept as is. The
// bytes of all tokens are joined and decoded leniently (invalid UTF-8 -> U+FFFD).
class ByteLevelDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const size_t mark = bytes.size();
      size_t i = 0;
      bool ok = true;
      while (i < t.size()) {
        const int b = ByteLevelByte(NextChar(t, i));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes.push_back(char(b));
      }
      if (!ok) {
        bytes.resize(mark);
        bytes.append(t);
      }
    }
    tokens.assign(1, IsValidUtf8(bytes) ? std::move(bytes) : ToValidUtf8(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) ReplaceAll(pattern_, content_, t);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of "<0xNN>" tokens become the UTF-8 text of their bytes, or one U+FFFD per byte when the
// run is not valid UTF-8.
class ByteFallbackDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (IsValidUtf8(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run.size(); ++k) out.emplace_back(kReplacementChar);
      }
      run.clear();
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>')
        byte = ParseHexByte(t[3], t[4]);
      if (byte >= 0) {
        run.push_back(char(byte));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Rust's u8::from_str_radix(.., 16) on two characters (a leading '+' is allowed).
  static int ParseHexByte(char a, char b) {
    if (a == '+') return Hex(b);
    const int hi = Hex(a), lo = Hex(b);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all.append(t);
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters from every token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t b = 0;
      for (size_t k = 0; k < start_ && b < t.size(); ++k) {
        size_t i = b;
        if (NextChar(t, i) != content_) break;
        b = i;
      }
      size_t e = t.size();
      for (size_t k = 0; k < stop_ && e > b; ++k) {
        size_t s;
        if (PrevChar(t, e, &s) != content_) break;
        e = s;
      }
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// The replacement character becomes a space, except in the first token where it is dropped
// (when a prefix space was added at encoding).
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool drop_in_first)
      : replacement_(replacement), drop_in_first_(drop_in_first) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string& t = tokens[k];
      std::string out;
      size_t i = 0;
      while (i < t.size()) {
        const size_t b = i;
        const char32_t c = NextChar(t, i);
        if (c != replacement_) {
          out.append(t, b, i - b);
        } else if (!(k == 0 && drop_in_first_)) {
          out.push_back(' ');
        }
      }
      t.swap(out);
    }
  }

 private:
  char32_t replacement_;
  bool drop_in_first_;
};

// BPEDecoder: the end-of-word suffix becomes a space (nothing on the last token).
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    const Pattern p = Pattern::Literal(suffix_);
    for (size_t k = 0; k < tokens.size(); ++k) {
      ReplaceAll(p, k + 1 == tokens.size() ? "" : " ", tokens[k]);
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t GetCount(const Json& j, const char* key, const std::string& w) {
  const int64_t v = GetIntOr(j, key, 0, w);
  TQ_CHECK(v >= 0 && v < (int64_t{1} << 31), w, "field '{}' out of range: {}", key, v);
  return size_t(v);
}

}  // namespace

std::unique_ptr<Decoder> MakeDecoder(const Json& j, const std::string& where) {
  NestingGuard guard(where);
  const std::string type = TypeOf(j, where);
  const std::string w = where + ": decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(MakePattern(Field(j, "pattern", w), w),
                                            GetString(j, "content", w));
  }
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(GetChar(j, "content", w), GetCount(j, "start", w),
                                          GetCount(j, "stop", w));
  }
  if (type == "Metaspace") {
    bool drop = true;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      const std::string s = GetString(j, "prepend_scheme", w);
      TQ_CHECK(s == "always" || s == "first" || s == "never", w, "unknown prepend_scheme '{}'", s);
      drop = s != "never";
    } else {
      drop = GetBoolOr(j, "add_prefix_space", true, w);
    }
    return std::make_unique<MetaspaceDecoder>(GetChar(j, "replacement", w), drop);
  }
  if (type == "BPEDecoder") {
    return std::make_unique<BpeSuffixDecoder>(GetStringOr(j, "suffix", "</w>", w));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const Json& e : GetArray(j, "decoders", w)) parts.push_back(MakeDecoder(e, where));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  Fail(where, "unsupported decoder type '{}'", type);
}

}  // namespace tq::tok
