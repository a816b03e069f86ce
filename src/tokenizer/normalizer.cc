#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/ustring.h>

#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace tq::tok {

namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  enum Form { kNFC, kNFD, kNFKC, kNFKD };
  UnicodeNormalizer(Form form, const std::string& where) : where_(where) {
    UErrorCode st = U_ZERO_ERROR;
    switch (form) {
      case kNFC:
        norm_ = icu::Normalizer2::getNFCInstance(st);
        break;
      case kNFD:
        norm_ = icu::Normalizer2::getNFDInstance(st);
        break;
      case kNFKC:
        norm_ = icu::Normalizer2::getNFKCInstance(st);
        break;
      case kNFKD:
        norm_ = icu::Normalizer2::getNFKDInstance(st);
        break;
    }
    TQ_CHECK(U_SUCCESS(st) && norm_, where, "ICU normalizer unavailable: {}", u_errorName(st));
  }
  void Normalize(std::string& s) const override {
    UErrorCode st = U_ZERO_ERROR;
    const icu::StringPiece in(s.data(), int32_t(s.size()));
    if (norm_->isNormalizedUTF8(in, st) && U_SUCCESS(st)) return;
    st = U_ZERO_ERROR;
    std::string out;
    out.reserve(s.size() + s.size() / 4);
    icu::StringByteSink<std::string> sink(&out);
    norm_->normalizeUTF8(0, in, sink, nullptr, st);
    TQ_CHECK(U_SUCCESS(st), where_, "ICU normalization failed: {}", u_errorName(st));
    s.swap(out);
  }

 private:
  const icu::Normalizer2* norm_ = nullptr;
  std::string where_;
};

// Per-character full case mapping with no context (Rust's char::to_lowercase/to_uppercase).
class CaseNormalizer final : public Normalizer {
 public:
  explicit CaseNormalizer(bool upper) : upper_(upper) {}
  void Normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      const char32_t c = NextChar(s, i);
      if (c < 0x80) {
        char b = char(c);
        if (upper_ && b >= 'a' && b <= 'z') b = char(b - 32);
        if (!upper_ && b >= 'A' && b <= 'Z') b = char(b + 32);
        out.push_back(b);
        continue;
      }
      UChar src[2], dst[8];
      int32_t n = 0;
      U16_APPEND_UNSAFE(src, n, UChar32(c));
      UErrorCode st = U_ZERO_ERROR;
      const int32_t m =
          upper_ ? u_strToUpper(dst, 8, src, n, "", &st) : u_strToLower(dst, 8, src, n, "", &st);
      if (U_FAILURE(st)) {
        AppendUtf8(out, c);
        continue;
      }
      for (int32_t k = 0; k < m;) {
        UChar32 cp;
        U16_NEXT(dst, k, m, cp);
        AppendUtf8(out, char32_t(cp));
      }
    }
    s.swap(out);
  }

 private:
  bool upper_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!IsWhitespace(NextChar(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t start;
        if (!IsWhitespace(PrevChar(s, e, &start))) break;
        e = start;
      }
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void Normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      const size_t b = i;
      const char32_t c = NextChar(s, i);
      if (c < 0x80 || !IsMark(c)) out.append(s, b, i - b);
    }
    s.swap(out);
  }
};

// Prepend / Append: add `text` when the piece is not empty.
class AffixNormalizer final : public Normalizer {
 public:
  AffixNormalizer(std::string text, bool prepend) : text_(std::move(text)), prepend_(prepend) {}
  void Normalize(std::string& s) const override {
    if (s.empty()) return;
    if (prepend_) {
      s.insert(0, text_);
    } else {
      s.append(text_);
    }
  }

 private:
  std::string text_;
  bool prepend_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Normalize(std::string& s) const override { ReplaceAll(pattern_, content_, s); }

 private:
  Pattern pattern_;
  std::string content_;
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void Normalize(std::string& s) const override {
    std::string out;
    ByteLevelEncode(s, out);
    s.swap(out);
  }
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void Normalize(std::string& s) const override {
    for (const auto& p : parts_) p->Normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> MakeNormalizer(const Json& j, const std::string& where) {
  NestingGuard guard(where);
  const std::string type = TypeOf(j, where);
  const std::string w = where + ": normalizer " + type;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UnicodeNormalizer::kNFC, w);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UnicodeNormalizer::kNFD, w);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UnicodeNormalizer::kNFKC, w);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UnicodeNormalizer::kNFKD, w);
  if (type == "Lowercase") return std::make_unique<CaseNormalizer>(false);
  if (type == "Uppercase") return std::make_unique<CaseNormalizer>(true);
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(GetBoolOr(j, "strip_left", true, w),
                                             GetBoolOr(j, "strip_right", true, w));
  }
  if (type == "Prepend") return std::make_unique<AffixNormalizer>(GetString(j, "prepend", w), true);
  if (type == "Append") return std::make_unique<AffixNormalizer>(GetString(j, "append", w), false);
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(MakePattern(Field(j, "pattern", w), w),
                                               GetString(j, "content", w));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const Json& e : GetArray(j, "normalizers", w)) parts.push_back(MakeNormalizer(e, where));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  Fail(where, "unsupported normalizer type '{}'", type);
}

}  // namespace tq::tok
